//! Callback tracing services: synchronous enter/exit on the calling thread,
//! per-call user data carried from enter to exit, operation filters.

use std::sync::{Arc, Mutex};
use strobe_buffer::{callback_enter, CallbackRecord, Context, Kind, Phase, UserData};

#[test]
fn enter_and_exit_run_on_the_calling_thread_with_user_data_carried() {
    let ctx = Context::create().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    ctx.configure_callback_tracing(
        Kind::LibraryCall,
        Some(&[2, 3]),
        move |r: &CallbackRecord, data: &mut UserData| {
            let this_thread = std::thread::current().id();
            match r.phase() {
                Phase::Enter => {
                    // Stash something per call: the enter timestamp stand-in.
                    data.value = 1000 + r.operation as u64;
                }
                Phase::Exit => {}
            }
            l.lock().unwrap().push((
                this_thread,
                r.phase(),
                r.operation,
                r.correlation_id,
                data.value(),
                r.payload_bytes().to_vec(),
            ));
        },
    )
    .unwrap();
    ctx.start().unwrap();
    let me = std::thread::current().id();

    let scope = ctx.callback_enter(Kind::LibraryCall, 2, b"args");
    assert_eq!(scope.len(), 1);
    let corr = scope.correlation_id();
    assert_ne!(corr, 0);
    // Nested call on the same thread gets its own user data.
    let inner = ctx.callback_enter(Kind::LibraryCall, 3, b"");
    inner.exit(b"ret3");
    scope.exit(b"ret");
    // Filtered operation: nothing runs.
    assert!(ctx.callback_enter(Kind::LibraryCall, 0, b"").is_empty());

    let log = log.lock().unwrap();
    assert_eq!(log.len(), 4);
    assert!(
        log.iter().all(|e| e.0 == me),
        "synchronous, on the calling thread"
    );
    assert_eq!(
        (log[0].1, log[0].2, log[0].3, log[0].4),
        (Phase::Enter, 2, corr, 1002)
    );
    assert_eq!(log[0].5, b"args");
    assert_eq!((log[1].1, log[1].2, log[1].4), (Phase::Enter, 3, 1003));
    assert_eq!((log[2].1, log[2].2, log[2].4), (Phase::Exit, 3, 1003));
    assert_eq!(log[2].5, b"ret3");
    assert_eq!((log[3].1, log[3].3, log[3].4), (Phase::Exit, corr, 1002));
    assert_ne!(log[1].3, corr, "each call has its own correlation id");
}

#[test]
fn global_enter_reaches_every_active_context_and_survives_a_panic() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut contexts = Vec::new();
    for n in 0..2u64 {
        let ctx = Context::create().unwrap();
        let c = calls.clone();
        ctx.configure_callback_tracing(Kind::Xpti, None, move |r, data| {
            if r.phase() == Phase::Enter {
                data.value = n;
                if n == 0 && r.operation == 7 {
                    panic!("tool bug");
                }
            }
            c.lock().unwrap().push((n, r.phase(), data.value()));
        })
        .unwrap();
        ctx.start().unwrap();
        contexts.push(ctx);
    }
    let scope = callback_enter(Kind::Xpti, 1, &[]);
    assert_eq!(scope.len(), 2);
    drop(scope); // exit runs on drop
                 // Context 0 panics at enter of operation 7: caught, the producer goes on.
    let scope = callback_enter(Kind::Xpti, 7, &[]);
    scope.exit(&[]);
    let calls = calls.lock().unwrap();
    assert_eq!(
        calls[..4],
        [
            (0, Phase::Enter, 0),
            (1, Phase::Enter, 1),
            (1, Phase::Exit, 1),
            (0, Phase::Exit, 0)
        ]
    );
    assert!(calls[4..].contains(&(1, Phase::Enter, 1)));
    assert!(calls[4..].contains(&(1, Phase::Exit, 1)));
    for ctx in contexts {
        ctx.stop().unwrap();
    }
    assert!(callback_enter(Kind::Xpti, 1, &[]).is_empty());
}
