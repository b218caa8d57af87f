//! Kernel-assisted sampling: the second sampling backend, for what the
//! in-program sampler cannot see (a static program, where nothing can be
//! preloaded), or for everything when asked (`sampler = kernel`).
//!
//! Owns the kernel's sampling events ([`perf`]), their records
//! ([`records`]) and unwinding their stack copies in the collector
//! ([`unwind`]). The samples it produces are stored exactly like the
//! runtime's. Never runs in the profiled program.

pub mod perf;
pub mod records;
pub mod unwind;

#[cfg(test)]
mod tests {
    use super::records::{decode, Record};
    use super::*;

    #[test]
    fn a_childs_cpu_time_is_sampled_with_stacks_the_collector_can_unwind() {
        let mut events = match perf::Events::for_children(1000, 16 * 1024, 256, false) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("skipped: the kernel refuses sampling events here: {e}");
                return;
            }
        };
        let child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut raw = Vec::new();
        let mut child = child;
        loop {
            for ring in events.rings() {
                ring.drain(|r| raw.push(r.to_vec()));
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for ring in events.rings() {
            ring.drain(|r| raw.push(r.to_vec()));
        }
        let mut unwinder: Option<unwind::ProcessUnwinder> = None;
        let (mut samples, mut deep) = (0, 0);
        for r in &raw {
            match decode(r) {
                Some(Record::Mmap {
                    pid: p,
                    start,
                    len,
                    offset,
                    executable: true,
                    path,
                }) if p == pid && path.starts_with('/') => {
                    let u =
                        unwinder.get_or_insert_with(|| unwind::ProcessUnwinder::for_process(-1));
                    if let Some(m) =
                        strobe_symbols::proc_maps::module_for_mapping(start, offset, len, path)
                    {
                        u.add(m);
                    }
                }
                Some(Record::Sample(s)) if s.pid == pid => {
                    samples += 1;
                    let u =
                        unwinder.get_or_insert_with(|| unwind::ProcessUnwinder::for_process(-1));
                    let (frames, _) = u.unwind(s.ip, s.sp, s.bp, s.stack, 256);
                    if frames.len() >= 3 {
                        deep += 1;
                    }
                }
                _ => {}
            }
        }
        assert!(
            samples >= 50,
            "{samples} samples of the child ({} records)",
            raw.len()
        );
        assert!(
            deep * 10 >= samples * 9,
            "{deep} of {samples} samples unwound 3 frames or more"
        );
    }
}
