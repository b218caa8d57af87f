mod common;
use common::*;
use strobe_core::thread::gettid;
use strobe_sampler::{Sampler, TimerClock};

#[test]
fn probe() {
    let w = load_workload();
    for round in 0..8 {
        let seg = segment(4, 1 << 18);
        let sampler = Sampler::start(config(Some(250.0), Some(1000.0)), seg).unwrap();
        let slot = seg.claim_slot(gettid()).unwrap();
        sampler.register_current_thread(slot).unwrap();
        (w.spin_ms)(100.0);
        sampler.stop();
        let a = drain(seg, slot);
        let c1 = counters(seg, slot);
        (w.spin_ms)(150.0);
        sampler.restart();
        let t0 = std::time::Instant::now();
        (w.spin_ms)(100.0);
        sampler.unregister_current_thread();
        sampler.stop();
        let b = drain(seg, slot);
        let c2 = counters(seg, slot);
        let n = |v: &Vec<Kept>, c| v.iter().filter(|s| s.clock == c).count();
        eprintln!("round {round}: before cpu {} real {} {:?} | after ({:?}) cpu {} real {} {:?}", n(&a, TimerClock::ThreadCpu), n(&a, TimerClock::Realtime), c1, t0.elapsed(), n(&b, TimerClock::ThreadCpu), n(&b, TimerClock::Realtime), c2);
    }
}
