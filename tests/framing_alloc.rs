//! Heap allocations per message, counted by a global allocator: none in the framing layer (the
//! line buffer and the output queue are reused), and a bounded few in the whole loop.
//!
//! Only allocations made on a thread that switched counting on are counted, so tests running in
//! parallel do not disturb each other.
// The counting allocator below is the only unsafe code here (the library keeps all of its
// unsafe code in `src/sys.rs`).
#![allow(unsafe_code)]

mod util;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::thread;
use std::time::Duration;

use mcpipe::internals::{LineSplitter, OutputQueue};
use mcpipe::{Context, ErrorObject, Handler, Message, Request, Response, Server};
use serde_json::{json, Value};

/// Counts allocations per thread; see [`CountingAllocator`].
#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Allocations (and reallocations) `f` makes on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    let was = COUNT_HERE.with(|c| c.replace(true));
    f();
    COUNT_HERE.with(|c| c.set(was));
    ALLOCATIONS.with(Cell::get) - before
}

thread_local! {
    // `const` with `Cell`s: no lazy initialisation and no destructor, so the allocator can use
    // them without allocating or recursing. Per thread, so parallel tests do not mix counts.
    static COUNT_HERE: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// A global allocator that forwards to [`System`] and counts the allocations and reallocations
/// made inside [`allocations_in`] on the calling thread.
struct CountingAllocator;

impl CountingAllocator {
    fn note() {
        if COUNT_HERE.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so it keeps
// `System`'s guarantees; counting touches only const thread-locals, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CountingAllocator::note();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CountingAllocator::note();
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        CountingAllocator::note();
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; the caller upholds `dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The other tests only bound counts from above; this one shows the counter counts at all.
#[test]
fn the_counter_sees_allocations_on_this_thread_only() {
    let here = allocations_in(|| {
        let v: Vec<u8> = std::hint::black_box(Vec::with_capacity(64));
        drop(std::hint::black_box(v));
    });
    assert_eq!(here, 1);
    let elsewhere = allocations_in(|| {
        thread::spawn(|| drop(std::hint::black_box(vec![0u8; 64])))
            .join()
            .expect("the thread ends");
    });
    let spawned_alone = allocations_in(|| {
        thread::spawn(|| ()).join().expect("the thread ends");
    });
    assert_eq!(
        elsewhere, spawned_alone,
        "another thread's allocation was counted"
    );
}

/// `count` echo requests of about 170 bytes, one per line.
fn requests(first_id: u64, count: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for id in first_id..first_id + count {
        out.extend_from_slice(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"echo\",\"params\":{{\"text\":\"{}\"}}}}\n",
                "t".repeat(100)
            )
            .as_bytes(),
        );
    }
    out
}

/// Feeds `input` through the line buffer in reads of `read` bytes and answers each line through
/// the output queue with a fixed-shape line, writing to a peer that takes at most 4 KiB a call
/// and blocks every third call. Returns the number of lines.
fn frame(lines: &mut LineSplitter, queue: &mut OutputQueue, input: &[u8], read: usize) -> usize {
    let mut count = 0;
    let mut calls = 0u32;
    let mut rest = input;
    while !rest.is_empty() {
        let spare = lines.spare();
        let n = spare.len().min(read).min(rest.len());
        spare[..n].copy_from_slice(&rest[..n]);
        lines.commit(n);
        rest = &rest[n..];
        while let Some(line) = lines.next_line() {
            let line = line.expect("no line is oversize");
            let out = queue.buffer();
            out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            let id_at = memchr::memmem::find(line, b"\"id\":").expect("every line has an id") + 5;
            let id_len = memchr::memchr(b',', &line[id_at..]).expect("the id ends");
            out.extend_from_slice(&line[id_at..id_at + id_len]);
            out.extend_from_slice(b",\"result\":{}}\n");
            count += 1;
        }
        let _ = queue.write_to(|bytes| {
            calls += 1;
            if calls.is_multiple_of(3) {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            Ok(bytes.len().min(4096))
        });
    }
    while !queue
        .write_to(|bytes| Ok(bytes.len()))
        .expect("the sink takes all")
    {}
    count
}

#[test]
fn the_framing_layer_allocates_nothing_per_message_once_warm() {
    let mut lines = LineSplitter::new(64 << 20);
    let mut queue = OutputQueue::new(64 << 20);
    let input = requests(1, 20_000);
    for read in [65_536, 4_096, 173, 1] {
        // Warm-up: the same traffic once, so the buffers reach their working size.
        assert_eq!(frame(&mut lines, &mut queue, &input, read), 20_000);
        let mut count = 0;
        let allocations = allocations_in(|| count = frame(&mut lines, &mut queue, &input, read));
        assert_eq!(count, 20_000);
        assert_eq!(
            allocations, 0,
            "{allocations} allocations framing 20,000 messages in reads of {read} bytes"
        );
    }
    assert_eq!(queue.pending(), 0);
}

/// Allocations per request in the message layer: parse, answer, serialise. Reported, and
/// bounded so that a regression shows; where they come from is listed in BENCHMARKS.md.
#[test]
fn the_message_layer_allocates_a_bounded_few_per_request() {
    let input = requests(1, 1_000);
    let mut out = Vec::with_capacity(1 << 20);
    let allocations = allocations_in(|| {
        for line in input.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(Message::Request(req)) = Message::from_slice(line) else {
                panic!("not a request");
            };
            let response = Response::ok(req.id, req.params.unwrap_or(Value::Null));
            Message::Response(response).write_line(&mut out);
        }
    });
    let per_request = allocations as f64 / 1_000.0;
    eprintln!("message layer: {per_request:.2} allocations per request (parse + serialise)");
    assert!(per_request <= 11.0, "{per_request} allocations per request");
}

struct Echo;

impl Handler for Echo {
    fn handle_request(
        &mut self,
        req: Request,
        _cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        match req.method.as_str() {
            "echo" => Ok(req.params.unwrap_or(json!({}))),
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

/// The whole loop on pipes, counted on the server's thread only: allocations per request.
#[test]
fn the_loop_allocates_a_bounded_few_per_request() {
    let _watchdog = util::watchdog(
        "the_loop_allocates_a_bounded_few_per_request",
        Duration::from_secs(60),
    );
    let (in_read, mut in_write) = std::io::pipe().expect("pipe");
    let (out_read, out_write) = std::io::pipe().expect("pipe");
    let server = thread::spawn(move || {
        let server = Server::new()
            .handle_signals(false)
            .idle_timeout(None)
            .log_bad_input(false);
        let mut stats = None;
        let allocations = allocations_in(|| {
            stats = Some(server.serve(in_read.as_fd(), out_write.as_fd(), &mut Echo));
        });
        drop(out_write);
        (allocations, stats)
    });
    // Warm-up traffic is counted too; 20,000 requests make its share small.
    let total = 20_000u64;
    let input = requests(1, total);
    let writer = thread::spawn(move || {
        in_write.write_all(&input).expect("writing requests");
    });
    let mut reader = BufReader::new(out_read);
    let mut line = String::new();
    let mut answered = 0;
    while answered < total {
        line.clear();
        assert!(
            reader.read_line(&mut line).expect("reading") > 0,
            "output ended early"
        );
        let v: Value = serde_json::from_str(&line).expect("a JSON response");
        answered += 1;
        assert_eq!(v["id"], answered);
        assert_eq!(v["result"]["text"].as_str().map(str::len), Some(100));
    }
    writer.join().expect("writer");
    let (allocations, outcome) = server.join().expect("server thread");
    assert!(outcome.expect("served").is_ok());
    let per_request = allocations as f64 / total as f64;
    eprintln!("whole loop: {per_request:.2} allocations per request");
    assert!(per_request <= 11.0, "{per_request} allocations per request");
}
