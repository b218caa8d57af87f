//! The counter-name parser behind [`super::resolve`].
//!
//! Owns turning one written name into a [`CounterSpec`]: table lookups
//! (case-insensitive), `:u`/`:k` modifiers, `pmu/terms/` through sysfs
//! format layouts, named PMU events (`pmu/alias/` and bare when only one
//! PMU has the name), `rNNNN`, tracepoints, rusage/proc/tool names, and
//! errors that say what was not understood and what exists. Never opens
//! a perf event (resolving is not probing) and never writes anything.

use super::sysfs::{self, Format, Term};
use super::tables::{self, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use super::{
    nearest, slots, CatalogError, CounterKind, CounterSpec, PerfEvent, ProcField, Roots,
    RusageField, Source, ToolCounter,
};

/// Which privilege levels a perf event counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Modifiers {
    exclude_user: bool,
    exclude_kernel: Option<bool>,
    /// As written, for the canonical name (`u`, `k`, `uk`; empty if none).
    text: &'static str,
}

/// Letters perf accepts as event modifiers; strobe supports `u`, `k`, `h`.
const MODIFIER_LETTERS: &str = "ukhpPGHSDIWe";

fn looks_like_modifiers(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| MODIFIER_LETTERS.contains(c))
}

fn parse_modifiers(spec: &str, s: &str) -> Result<Modifiers, CatalogError> {
    let (mut u, mut k) = (false, false);
    for c in s.chars() {
        match c {
            'u' => u = true,
            'k' => k = true,
            'h' => {}
            other => {
                return Err(CatalogError::Syntax {
                    spec: spec.to_string(),
                    reason: format!(
                        "modifier `{other}` is not supported: strobe counts, and takes `u` \
                         (user space only), `k` (kernel only) or `uk`"
                    ),
                })
            }
        }
    }
    Ok(match (u, k) {
        (true, false) => Modifiers {
            exclude_user: false,
            exclude_kernel: Some(true),
            text: "u",
        },
        (false, true) => Modifiers {
            exclude_user: true,
            exclude_kernel: Some(false),
            text: "k",
        },
        (true, true) => Modifiers {
            exclude_user: false,
            exclude_kernel: Some(false),
            text: "uk",
        },
        (false, false) => Modifiers::default(),
    })
}

fn perf_spec(
    name: String,
    kind: CounterKind,
    pmu: &str,
    type_: u32,
    words: [u64; 4],
    unit: &str,
) -> CounterSpec {
    CounterSpec {
        name,
        kind,
        unit: unit.to_string(),
        scale: 1.0,
        source: Source::Perf(PerfEvent {
            pmu: pmu.to_string(),
            type_,
            config: words[0],
            config1: words[1],
            config2: words[2],
            config3: words[3],
            exclude_user: false,
            exclude_kernel: None,
        }),
    }
}

fn with_modifiers(
    mut spec: CounterSpec,
    m: Modifiers,
    append_to_name: Option<&str>,
) -> CounterSpec {
    if let Source::Perf(ev) = &mut spec.source {
        ev.exclude_user = m.exclude_user;
        ev.exclude_kernel = m.exclude_kernel;
    }
    if !m.text.is_empty() {
        if let Some(sep) = append_to_name {
            spec.name = format!("{}{sep}{}", spec.name, m.text);
        }
    }
    spec
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// A perf generic event, rusage/proc field or tool counter by name.
fn table_name(name: &str) -> Option<CounterSpec> {
    for g in tables::HARDWARE {
        if eq(g.name, name) || g.aliases.iter().any(|a| eq(a, name)) {
            return Some(perf_spec(
                g.name.into(),
                CounterKind::Hardware,
                "cpu",
                TYPE_HARDWARE,
                [g.config, 0, 0, 0],
                g.unit,
            ));
        }
    }
    for g in tables::SOFTWARE {
        if eq(g.name, name) || g.aliases.iter().any(|a| eq(a, name)) {
            return Some(software_spec(g));
        }
    }
    for c in tables::cache_events() {
        if eq(&c.name, name) {
            return Some(perf_spec(
                c.name,
                CounterKind::HardwareCache,
                "cpu",
                TYPE_HW_CACHE,
                [c.config, 0, 0, 0],
                "",
            ));
        }
    }
    if let Some(f) = rusage_field(name) {
        return Some(rusage_spec(f));
    }
    if let Some(f) = proc_field(name) {
        return Some(proc_spec(f));
    }
    if eq(name, "duration_time") {
        return Some(tool_spec(ToolCounter::DurationTime));
    }
    None
}

fn software_spec(g: &tables::Generic) -> CounterSpec {
    perf_spec(
        g.name.into(),
        CounterKind::Software,
        "software",
        TYPE_SOFTWARE,
        [g.config, 0, 0, 0],
        g.unit,
    )
}

fn rusage_field(name: &str) -> Option<RusageField> {
    tables::RUSAGE
        .iter()
        .copied()
        .find(|f| f.names().iter().any(|n| eq(n, name)))
}

fn proc_field(name: &str) -> Option<ProcField> {
    tables::PROC
        .iter()
        .copied()
        .find(|f| f.names().iter().any(|n| eq(n, name)))
}

pub(crate) fn rusage_spec(f: RusageField) -> CounterSpec {
    CounterSpec {
        name: format!("rusage/{}/", f.name()),
        kind: CounterKind::Rusage,
        unit: f.unit().into(),
        scale: 1.0,
        source: Source::Rusage(f),
    }
}

pub(crate) fn proc_spec(f: ProcField) -> CounterSpec {
    CounterSpec {
        name: format!("proc/{}/", f.name()),
        kind: CounterKind::Proc,
        unit: f.unit().into(),
        scale: 1.0,
        source: Source::Proc(f),
    }
}

pub(crate) fn tool_spec(t: ToolCounter) -> CounterSpec {
    CounterSpec {
        name: t.name().into(),
        kind: CounterKind::Tool,
        unit: "ns".into(),
        scale: 1.0,
        source: Source::Tool(t),
    }
}

/// `r` followed by hexadecimal digits: `PERF_TYPE_RAW`.
fn raw_name(name: &str) -> Option<CounterSpec> {
    let hex = name.strip_prefix('r')?;
    if hex.is_empty() || hex.len() > 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let config = u64::from_str_radix(hex, 16).ok()?;
    Some(perf_spec(
        format!("r{hex}"),
        CounterKind::Raw,
        "cpu",
        TYPE_RAW,
        [config, 0, 0, 0],
        "",
    ))
}

/// A name without modifiers: tables, raw, then a PMU's named event when
/// only one PMU has it.
fn base_name(name: &str, spec: &str, roots: &Roots) -> Result<Option<CounterSpec>, CatalogError> {
    if let Some(s) = table_name(name) {
        return Ok(Some(s));
    }
    if let Some(s) = raw_name(name) {
        return Ok(Some(s));
    }
    if name.is_empty() || name.contains('/') {
        return Ok(None);
    }
    let owners: Vec<String> = sysfs::pmus(roots)
        .into_iter()
        .filter(|p| sysfs::named_event(roots, p, name).is_some())
        .collect();
    match owners.len() {
        0 => Ok(None),
        1 => pmu_form(&format!("{}/{name}/", owners[0]), roots).map(Some),
        _ => Err(CatalogError::Syntax {
            spec: spec.to_string(),
            reason: format!(
                "`{name}` is an event of several PMUs ({}): write `{}/{name}/`",
                owners.join(", "),
                owners[0]
            ),
        }),
    }
}

/// Every plain name the parser knows, for "did you mean".
fn known_names(roots: &Roots) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for g in tables::HARDWARE.iter().chain(tables::SOFTWARE) {
        out.push(g.name.into());
        out.extend(g.aliases.iter().map(|a| a.to_string()));
    }
    out.extend(tables::cache_events().into_iter().map(|c| c.name));
    for f in tables::RUSAGE {
        out.extend(f.names().iter().map(|n| n.to_string()));
    }
    for f in tables::PROC {
        out.extend(f.names().iter().map(|n| n.to_string()));
    }
    out.push("duration_time".into());
    for p in sysfs::pmus(roots) {
        for e in sysfs::named_events(roots, &p) {
            out.push(format!("{p}/{}/", e.name));
        }
    }
    out
}

fn unknown(name: &str, roots: &Roots) -> CatalogError {
    let known = known_names(roots);
    CatalogError::Unknown {
        name: name.to_string(),
        suggestion: nearest(name, known.iter().map(String::as_str)),
    }
}

pub(crate) fn resolve(spec: &str, roots: &Roots) -> Result<CounterSpec, CatalogError> {
    let s = spec.trim();
    if s.is_empty() {
        return Err(CatalogError::Syntax {
            spec: spec.to_string(),
            reason: "the event name is empty".into(),
        });
    }
    if s.contains('/') {
        return pmu_form(s, roots);
    }
    if let Some((head, tail)) = s.rsplit_once(':') {
        if looks_like_modifiers(tail) {
            if let Some(base) = base_name(head, s, roots)? {
                if !base.kind.is_perf() {
                    return Err(CatalogError::Syntax {
                        spec: s.to_string(),
                        reason: format!(
                            "`{}` is not a perf event and takes no modifiers",
                            base.name
                        ),
                    });
                }
                let m = parse_modifiers(s, tail)?;
                return Ok(with_modifiers(base, m, Some(":")));
            }
            if head.contains(':') {
                let m = parse_modifiers(s, tail)?;
                return Ok(with_modifiers(tracepoint(head, roots)?, m, Some(":")));
            }
            return Err(unknown(head, roots));
        }
        if !head.contains(':') {
            return tracepoint(s, roots);
        }
        return Err(CatalogError::Syntax {
            spec: s.to_string(),
            reason: "expected `subsystem:tracepoint` or `event:modifiers`".into(),
        });
    }
    match base_name(s, s, roots)? {
        Some(found) => Ok(found),
        None => Err(unknown(s, roots)),
    }
}

/// `sys:name`.
fn tracepoint(s: &str, roots: &Roots) -> Result<CounterSpec, CatalogError> {
    let (sys, name) = s.split_once(':').ok_or_else(|| CatalogError::Syntax {
        spec: s.to_string(),
        reason: "expected `subsystem:tracepoint`".into(),
    })?;
    let err = |reason: String| CatalogError::Tracepoint {
        spec: s.to_string(),
        reason,
    };
    let dir = sysfs::tracefs(roots).map_err(err)?;
    if let Some(id) = sysfs::tracepoint_id(&dir, sys, name) {
        return Ok(perf_spec(
            format!("{sys}:{name}"),
            CounterKind::Tracepoint,
            "tracepoint",
            TYPE_TRACEPOINT,
            [id, 0, 0, 0],
            "",
        ));
    }
    let all = sysfs::tracepoints(&dir);
    match all.iter().find(|(subsystem, _)| subsystem == sys) {
        None => {
            let near = nearest(sys, all.iter().map(|(s, _)| s.as_str()));
            Err(err(format!(
                "no tracepoint subsystem `{sys}`{}; `strobe avail --tracepoints` lists them",
                near.map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default()
            )))
        }
        Some((_, names)) => {
            let near = nearest(name, names.iter().map(String::as_str));
            Err(err(format!(
                "subsystem `{sys}` has no tracepoint `{name}`{}",
                near.map(|n| format!("; did you mean `{sys}:{n}`?"))
                    .unwrap_or_default()
            )))
        }
    }
}

/// `pmu/body/modifiers`.
fn pmu_form(s: &str, roots: &Roots) -> Result<CounterSpec, CatalogError> {
    let (pmu, body, mods) = split_pmu_form(s)?;
    if let Some(spec) = pseudo_pmu_form(s, pmu, body, mods, roots) {
        return spec;
    }
    let m = parse_modifiers(s, mods)?;
    let lower = pmu.to_ascii_lowercase();
    if lower == "software" {
        if let Some(g) = tables::SOFTWARE
            .iter()
            .find(|g| eq(g.name, body) || g.aliases.iter().any(|a| eq(a, body)))
        {
            return Ok(with_modifiers(software_spec(g), m, Some(":")));
        }
    }
    if !sysfs::pmu_exists(roots, pmu) {
        return absent_pmu_form(s, pmu, body, m, roots);
    }
    let type_ = sysfs::pmu_type(roots, pmu).map_err(|reason| CatalogError::Sysfs {
        pmu: pmu.to_string(),
        reason,
    })?;
    let formats = sysfs::formats(roots, pmu);
    let (terms, alias) = match expand_terms(pmu, body, &formats, roots) {
        Terms::Expanded(terms, alias) => (terms, alias),
        Terms::Generic(spec) => return Ok(with_modifiers(spec, m, Some(":"))),
    };
    if terms.is_empty() {
        return Err(CatalogError::Syntax {
            spec: s.to_string(),
            reason: format!(
                "no terms between the slashes; PMU `{pmu}` takes {}",
                term_list(&formats)
            ),
        });
    }
    let (words, display) = encode_terms(s, pmu, body, &terms, &formats, roots)?;
    let name = display.unwrap_or_else(|| s.to_string());
    let kind = if type_ == TYPE_SOFTWARE {
        CounterKind::Software
    } else if type_ == TYPE_TRACEPOINT {
        CounterKind::Tracepoint
    } else {
        CounterKind::Raw
    };
    let mut spec = perf_spec(name, kind, pmu, type_, words, "");
    if let Some(a) = alias {
        spec.unit = a.unit;
        spec.scale = a.scale;
    }
    Ok(with_modifiers(spec, m, None))
}

/// `pmu/body/modifiers` cut at its first and last slash: the PMU, the
/// body, the modifiers (trimmed).
fn split_pmu_form(s: &str) -> Result<(&str, &str, &str), CatalogError> {
    let first = s.find('/').unwrap_or(0);
    let last = s.rfind('/').unwrap_or(0);
    if last == first {
        return Err(CatalogError::Syntax {
            spec: s.to_string(),
            reason: "a PMU event is written `pmu/terms/`: the closing `/` is missing".into(),
        });
    }
    let pmu = s[..first].trim();
    let body = s[first + 1..last].trim();
    let mods = s[last + 1..].trim();
    if pmu.is_empty() {
        return Err(CatalogError::Syntax {
            spec: s.to_string(),
            reason: "the PMU name before the first `/` is empty".into(),
        });
    }
    Ok((pmu, body, mods))
}

/// The forms whose "PMU" is strobe's, not the kernel's: `rusage/field/`,
/// `proc/field/`, `tool/duration_time/` (which take no modifiers). `None`
/// for any other PMU.
fn pseudo_pmu_form(
    s: &str,
    pmu: &str,
    body: &str,
    mods: &str,
    roots: &Roots,
) -> Option<Result<CounterSpec, CatalogError>> {
    let no_mods = |what: &str| -> Result<(), CatalogError> {
        if mods.is_empty() {
            Ok(())
        } else {
            Err(CatalogError::Syntax {
                spec: s.to_string(),
                reason: format!("{what} values take no modifiers (`{mods}`)"),
            })
        }
    };
    let spec = match pmu.to_ascii_lowercase().as_str() {
        "rusage" => no_mods("rusage").and_then(|()| {
            rusage_field(body)
                .map(rusage_spec)
                .ok_or_else(|| CatalogError::Unknown {
                    name: s.to_string(),
                    suggestion: nearest(
                        body,
                        tables::RUSAGE
                            .iter()
                            .flat_map(|f| f.names().iter().copied()),
                    )
                    .map(|n| format!("rusage/{n}/")),
                })
        }),
        "proc" => no_mods("proc").and_then(|()| {
            proc_field(body)
                .map(proc_spec)
                .ok_or_else(|| CatalogError::Unknown {
                    name: s.to_string(),
                    suggestion: nearest(
                        body,
                        tables::PROC.iter().flat_map(|f| f.names().iter().copied()),
                    )
                    .map(|n| format!("proc/{n}/")),
                })
        }),
        "tool" => no_mods("tool").and_then(|()| {
            if eq(body, "duration_time") {
                Ok(tool_spec(ToolCounter::DurationTime))
            } else {
                Err(unknown(s, roots))
            }
        }),
        _ => return None,
    };
    Some(spec)
}

/// A PMU form naming a PMU this machine does not have: perf's generic
/// names under the core PMU's name (`cpu/cycles/`) still resolve (the
/// open then says why they cannot be counted); anything else is an
/// unknown PMU, with the nearest name.
fn absent_pmu_form(
    s: &str,
    pmu: &str,
    body: &str,
    m: Modifiers,
    roots: &Roots,
) -> Result<CounterSpec, CatalogError> {
    let known = sysfs::pmus(roots);
    if pmu == "cpu" {
        if let Some(spec) = generic_hardware(body) {
            return Ok(with_modifiers(spec, m, Some(":")));
        }
    }
    let mut names: Vec<String> = known.clone();
    names.extend(["rusage", "proc", "tool"].map(String::from));
    Err(CatalogError::UnknownPmu {
        spec: s.to_string(),
        pmu: pmu.to_string(),
        suggestion: nearest(pmu, names.iter().map(String::as_str)),
        known,
    })
}

/// What the terms of `pmu/body/` stand for.
enum Terms {
    /// The terms, named events expanded into theirs (later terms fill `?`
    /// and override earlier ones of the same name), and the last named
    /// event used.
    Expanded(Vec<Term>, Option<sysfs::NamedEvent>),
    /// A generic hardware event under a core PMU's name (`cpu/cycles/`).
    Generic(CounterSpec),
}

/// Reads the terms of `body`, expanding the PMU's named events.
fn expand_terms(
    pmu: &str,
    body: &str,
    formats: &[(String, Result<Format, String>)],
    roots: &Roots,
) -> Terms {
    let is_format = |n: &str| formats.iter().any(|(f, _)| f == n);
    let mut terms: Vec<Term> = Vec::new();
    let mut alias = None;
    for t in sysfs::parse_terms(body) {
        if t.value.is_none() && !is_format(&t.name) && !is_config_word(&t.name) {
            if let Some(ev) = sysfs::named_event(roots, pmu, &t.name) {
                for at in sysfs::parse_terms(&ev.terms) {
                    merge(&mut terms, at);
                }
                alias = Some(ev);
                continue;
            }
            if slots::is_core_pmu(pmu) {
                if let Some(mut spec) = generic_hardware(&t.name) {
                    if let Source::Perf(ev) = &mut spec.source {
                        ev.pmu = pmu.to_string();
                    }
                    return Terms::Generic(spec);
                }
            }
        }
        merge(&mut terms, t);
    }
    Terms::Expanded(terms, alias)
}

/// Whether `name` sets a configuration word directly (`config`,
/// `config1`, `config2`, `config3`).
fn is_config_word(name: &str) -> bool {
    matches!(name, "config" | "config1" | "config2" | "config3")
}

/// The configuration words `terms` encode through the PMU's format
/// layouts (or set directly), and the display name a `name=` term gives.
fn encode_terms(
    s: &str,
    pmu: &str,
    body: &str,
    terms: &[Term],
    formats: &[(String, Result<Format, String>)],
    roots: &Roots,
) -> Result<([u64; 4], Option<String>), CatalogError> {
    let mut words = [0u64; 4];
    let mut display = None;
    for t in terms {
        let bad = |reason: String| CatalogError::BadValue {
            spec: s.to_string(),
            term: t.name.clone(),
            reason,
        };
        match t.name.as_str() {
            "name" => {
                display = t.value.clone().filter(|v| !v.is_empty());
                continue;
            }
            "period" => continue,
            _ => {}
        }
        let value = match t.value.as_deref() {
            None => 1,
            Some("?") => {
                return Err(bad(format!(
                    "the named event needs a value for it: write `{pmu}/{body},{}=N/`",
                    t.name
                )))
            }
            Some(v) => sysfs::parse_number(v)
                .ok_or_else(|| bad(format!("`{v}` is not a number (decimal or 0x hexadecimal)")))?,
        };
        if let Some((_, layout)) = formats.iter().find(|(f, _)| f == &t.name) {
            let layout: &Format = layout.as_ref().map_err(|e| CatalogError::Sysfs {
                pmu: pmu.to_string(),
                reason: format!("format/{}: {e}", t.name),
            })?;
            layout.encode(value, &mut words).map_err(bad)?;
        } else if is_config_word(&t.name) {
            let i = match t.name.as_str() {
                "config" => 0,
                "config1" => 1,
                "config2" => 2,
                _ => 3,
            };
            words[i] |= value;
        } else {
            let mut known: Vec<String> = formats.iter().map(|(f, _)| f.clone()).collect();
            known.extend(["config", "config1", "config2", "config3"].map(String::from));
            let events: Vec<String> = sysfs::named_events(roots, pmu)
                .into_iter()
                .map(|e| e.name)
                .collect();
            let suggestion = nearest(&t.name, known.iter().chain(&events).map(String::as_str));
            return Err(CatalogError::UnknownTerm {
                spec: s.to_string(),
                pmu: pmu.to_string(),
                term: t.name.clone(),
                suggestion,
                known,
            });
        }
    }
    Ok((words, display))
}

fn merge(terms: &mut Vec<Term>, t: Term) {
    match terms.iter_mut().find(|x| x.name == t.name) {
        Some(existing) => existing.value = t.value,
        None => terms.push(t),
    }
}

fn term_list(formats: &[(String, Result<Format, String>)]) -> String {
    let mut names: Vec<&str> = formats.iter().map(|(f, _)| f.as_str()).collect();
    names.extend(["config", "config1", "config2", "config3"]);
    names.join(", ")
}

/// perf's generic hardware or cache event by name.
fn generic_hardware(name: &str) -> Option<CounterSpec> {
    table_name(name)
        .filter(|s| matches!(s.kind, CounterKind::Hardware | CounterKind::HardwareCache))
}
