//! PLT stubs named as perf names them (`puts@plt`): code that no symbol
//! table covers, but that a sampled program runs on every call into a
//! shared library.
//!
//! Owns decoding the x86-64 PLT sections (`.plt`, `.plt.sec`, `.plt.got`)
//! and naming each stub from the dynamic relocation of the GOT slot it
//! jumps through. Other architectures have no stubs here (none decoded).
//! Never guesses: a stub whose first instruction is not the indirect jump,
//! or whose slot no relocation names, stays unnamed.

use crate::elf::{ElfFile, Rela, Section};
use object::elf;
use std::collections::{HashMap, HashSet};

/// A file's PLT stubs: `(start, end, name)`, sorted, by file address.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PltStubs(Vec<(u64, u64, String)>);

/// The PLT sections whose entries are stubs.
const PLT_SECTIONS: [&[u8]; 3] = [b".plt", b".plt.sec", b".plt.got"];

impl PltStubs {
    /// The stubs of `elf` (none unless it is an x86-64 file).
    ///
    /// Each stub of `.plt`, `.plt.sec` and `.plt.got` jumps through a GOT
    /// slot (`jmp *disp32(%rip)`, `ff 25`); the dynamic relocation of that
    /// slot names the symbol (`JUMP_SLOT`, `GLOB_DAT`), or its addend the
    /// ifunc resolver (`IRELATIVE`: the ifunc symbol there, else
    /// `*ABS*+0x…` as objdump writes it). Stubs whose slot has no
    /// relocation (`.plt`'s header) stay unnamed.
    pub fn of(elf: &ElfFile) -> PltStubs {
        if elf.machine() != elf::EM_X86_64 || !elf.is_64() {
            return PltStubs::default();
        }
        let sections = elf.sections();
        let stubs: Vec<(u64, u64, u64)> = sections
            .iter()
            .filter(|s| PLT_SECTIONS.contains(&s.name))
            .flat_map(|s| stubs_of(elf, s))
            .collect();
        if stubs.is_empty() {
            return PltStubs::default();
        }
        let slots: HashSet<u64> = stubs.iter().map(|s| s.2).collect();
        let mut names: HashMap<u64, String> = HashMap::new();
        for rela in sections.iter().filter(|s| s.kind == elf::SHT_RELA) {
            slot_names(elf, rela, &slots, &mut names);
        }
        let mut out: Vec<(u64, u64, String)> = stubs
            .into_iter()
            .filter_map(|(start, end, slot)| Some((start, end, names.get(&slot)?.clone())))
            .collect();
        out.sort();
        PltStubs(out)
    }

    /// Every stub, sorted: `(start, end, name)`.
    pub fn stubs(&self) -> &[(u64, u64, String)] {
        &self.0
    }

    /// The name of the stub holding file address `pc`.
    pub fn name_at(&self, pc: u64) -> Option<&str> {
        let i = self.0.partition_point(|s| s.0 <= pc).checked_sub(1)?;
        let (_, end, name) = &self.0[i];
        (pc < *end).then_some(name.as_str())
    }
}

/// The stubs of one PLT section: `(start, end, GOT slot jumped through)`.
fn stubs_of(elf: &ElfFile, section: &Section<'_>) -> Vec<(u64, u64, u64)> {
    let size = if section.entsize == 0 {
        16
    } else {
        section.entsize
    };
    let (Some(code), Ok(step)) = (elf.data(section), usize::try_from(size)) else {
        return Vec::new();
    };
    if !(8..=64).contains(&step) {
        return Vec::new();
    }
    let mut stubs = Vec::new();
    for (i, entry) in code.chunks_exact(step).enumerate() {
        // The jump opens the stub, after an `endbr64` and a `bnd` prefix
        // where present: never bytes inside another instruction.
        let Some(at) = [0usize, 1, 4, 5].into_iter().find(|&at| {
            entry.get(at..at + 2) == Some(&[0xff, 0x25][..])
                && matches!(
                    &entry[..at],
                    [] | [0xf2] | [0xf3, 0x0f, 0x1e, 0xfa] | [0xf3, 0x0f, 0x1e, 0xfa, 0xf2]
                )
        }) else {
            continue;
        };
        let Some(disp) = entry
            .get(at + 2..at + 6)
            .and_then(|d| <[u8; 4]>::try_from(d).ok())
            .map(i32::from_le_bytes)
        else {
            continue;
        };
        let start = section.addr + (i * step) as u64;
        let next = start + at as u64 + 6;
        stubs.push((
            start,
            start + size,
            next.wrapping_add_signed(i64::from(disp)),
        ));
    }
    stubs
}

/// Names the GOT `slots` that relocations of the `SHT_RELA` section `rela`
/// apply to, into `names` (`puts@plt`).
fn slot_names(
    elf: &ElfFile,
    rela: &Section<'_>,
    slots: &HashSet<u64>,
    names: &mut HashMap<u64, String>,
) {
    let symbols = elf.symbols(rela.link as usize);
    let name_of = |index: u32| -> Option<String> {
        let name = symbols.get(usize::try_from(index).ok()?)?.name;
        (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
    };
    // IRELATIVE slots (an ifunc called through the PLT) name no symbol:
    // their addend is the resolver's address, the value of the ifunc
    // symbol when the table has one.
    let mut resolvers: Vec<(u64, u64)> = Vec::new();
    for Rela {
        offset,
        kind,
        symbol,
        addend,
    } in elf.relas(rela)
    {
        if !slots.contains(&offset) {
            continue;
        }
        match kind {
            elf::R_X86_64_JUMP_SLOT | elf::R_X86_64_GLOB_DAT => {
                if let Some(name) = name_of(symbol) {
                    names.insert(offset, format!("{name}@plt"));
                }
            }
            elf::R_X86_64_IRELATIVE => resolvers.push((offset, addend as u64)),
            _ => {}
        }
    }
    if resolvers.is_empty() {
        return;
    }
    // The ifunc (or, failing one, function) symbol at each resolver
    // address; objdump's `*ABS*+0x…@plt` without one.
    let addends: HashSet<u64> = resolvers.iter().map(|r| r.1).collect();
    let mut at_value: HashMap<u64, (bool, String)> = HashMap::new();
    for sym in &symbols {
        let ifunc = sym.kind == elf::STT_GNU_IFUNC;
        if !addends.contains(&sym.value) || !(ifunc || sym.kind == elf::STT_FUNC) {
            continue;
        }
        if at_value
            .get(&sym.value)
            .is_some_and(|(was_ifunc, _)| *was_ifunc || !ifunc)
        {
            continue;
        }
        if !sym.name.is_empty() {
            let name = String::from_utf8_lossy(sym.name).into_owned();
            at_value.insert(sym.value, (ifunc, name));
        }
    }
    for (offset, addend) in resolvers {
        let name = match at_value.get(&addend) {
            Some((_, name)) => format!("{name}@plt"),
            None => format!("*ABS*+{addend:#x}@plt"),
        };
        names.insert(offset, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;
    use std::process::Command;

    /// The `@plt` labels `objdump -d` prints for the PLT sections of
    /// `file`, with `IRELATIVE` stubs named by the ifunc at their resolver
    /// where the dynamic symbol table has one (as perf, and strobe, name
    /// them).
    fn objdump_stubs(file: &str) -> Vec<(u64, String)> {
        let dump = Command::new("objdump")
            .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", file])
            .output()
            .unwrap();
        let mut expected: Vec<(u64, String)> = String::from_utf8_lossy(&dump.stdout)
            .lines()
            .filter_map(|l| {
                let (addr, label) = l.split_once(" <")?;
                let name = label.strip_suffix(">:")?;
                name.ends_with("@plt")
                    .then(|| (u64::from_str_radix(addr, 16).ok(), name.to_string()))
                    .and_then(|(a, n)| Some((a?, n)))
            })
            .collect();
        let ifuncs = Command::new("nm").args(["-D", file]).output().unwrap();
        let ifuncs = String::from_utf8_lossy(&ifuncs.stdout).into_owned();
        for (_, name) in expected.iter_mut() {
            let Some(resolver) = name
                .strip_prefix("*ABS*+0x")
                .and_then(|a| u64::from_str_radix(a.strip_suffix("@plt")?, 16).ok())
            else {
                continue;
            };
            if let Some(ifunc) = ifuncs.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[1] == "i" && u64::from_str_radix(f[0], 16).ok()? == resolver)
                    .then(|| f[2].to_string())
            }) {
                *name = format!("{ifunc}@plt");
            }
        }
        expected.sort();
        expected
    }

    #[test]
    fn plt_stubs_are_named_as_objdump_and_perf_name_them() {
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        std::fs::write(
            p("plt.c"),
            "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
             int (*keep)(const char *) = puts;\n\
             static int impl(int x) { return x + 5; }\n\
             static int (*resolve(void))(int) { return impl; }\n\
             int f(int) __attribute__((ifunc(\"resolve\")));\n\
             int main(int c, char **v) { puts(v[0]); printf(\"%zu\\n\", strlen(v[0]));\
             keep(\"x\"); return abs(c) + atoi(\"1\") + f(c); }\n",
        )
        .unwrap();
        // Lazy `.plt`; `.plt.sec` (IBT layout); not position-independent;
        // bound at start (`.plt.got` entries for address-taken functions
        // in every PIE variant); a shared library (the ifunc through a
        // `JUMP_SLOT`, elsewhere `IRELATIVE`); the ifunc exported.
        for flags in [
            &[][..],
            &["-Wl,-z,ibtplt"],
            &["-fcf-protection=full", "-Wl,-z,ibtplt"],
            &["-no-pie"],
            &["-Wl,-z,now"],
            &["-shared", "-fPIC"],
            &["-rdynamic"],
        ] {
            let out = p("plt");
            let mut args = vec!["-O2", "-o", &out];
            args.extend_from_slice(flags);
            let plt_c = p("plt.c");
            args.push(&plt_c);
            run("cc", &args);
            let expected = objdump_stubs(&out);
            assert!(expected.len() >= 5, "{flags:?}: {expected:?}");
            assert!(
                expected
                    .iter()
                    .any(|(_, n)| n.starts_with("f@plt") || n.starts_with("*ABS*")),
                "{flags:?}: no ifunc stub: {expected:?}"
            );
            if flags == ["-rdynamic"] {
                assert!(expected.iter().any(|(_, n)| n == "f@plt"), "{expected:?}");
            }
            let stubs = PltStubs::of(&ElfFile::open(&out).unwrap());
            let found: Vec<(u64, String)> =
                stubs.stubs().iter().map(|s| (s.0, s.2.clone())).collect();
            assert_eq!(found, expected, "{flags:?}");
            // A pc inside a stub gets its name; one past the last does not.
            let (first, last) = (&stubs.stubs()[0], stubs.stubs().last().unwrap());
            assert_eq!(stubs.name_at(first.0 + 3), Some(first.2.as_str()));
            assert_eq!(stubs.name_at(last.1), None);
        }
    }
}
