//! What reading a rule link costs the module's heap: decoding its record (once per cache fill)
//! allocates the same three blocks however many rules, values and targets it holds (the target,
//! the shared extras, the rules' bytes), and answering a click from it allocates nothing.
//! Counted by a global allocator, per thread, so the test harness's own threads do not count.

use shortlink_wire::record::{self, Extras, Record};
use shortlink_wire::rules::{Action, Click, Condition, Device, Rule, Target, Variant};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the count is a thread-local
// `Cell` with a const initialiser, which neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, i.e. from `System`, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocations<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATIONS.with(Cell::get);
    let value = f();
    (value, ALLOCATIONS.with(Cell::get) - before)
}

fn target(url: &str) -> Target {
    Target {
        url: url.as_bytes().into(),
        status: 302,
        forward_query: true,
    }
}

fn rule(condition: Condition, url: &str) -> Rule {
    Rule {
        conditions: vec![condition].into(),
        action: Action::Target(target(url)),
    }
}

/// The benchmark's five rules (bench-gen-codes): device, language, country, query, split.
fn record(rules: usize) -> Vec<u8> {
    let all = vec![
        rule(
            Condition::Device(Device::Ios.bit()),
            "https://apps.apple.com/app/id1",
        ),
        rule(
            Condition::Language(vec![b"pt"[..].into(), b"es"[..].into()].into()),
            "https://shop.example/pt",
        ),
        rule(
            Condition::Country(vec![*b"BR", *b"AO", *b"MZ"].into()),
            "https://shop.example/br",
        ),
        rule(
            Condition::Query {
                name: b"utm_source"[..].into(),
                value: Some(b"sms"[..].into()),
            },
            "https://shop.example/sms",
        ),
        Rule {
            conditions: Box::default(),
            action: Action::Split {
                variants: vec![
                    Variant {
                        weight: 1,
                        target: target("https://shop.example/a"),
                    },
                    Variant {
                        weight: 1,
                        target: target("https://shop.example/b"),
                    },
                ]
                .into(),
                sticky: true.into(),
            },
        },
    ];
    let extras = Extras {
        rules: all.into_iter().take(rules).collect::<Vec<_>>().into(),
        ..Extras::default()
    };
    Record::Live {
        status: 302,
        expires_at: 0,
        flags: 0,
        target: "https://shop.example/",
        extras: Some(&extras),
    }
    .encode()
}

#[test]
fn a_rule_link_is_read_in_three_allocations_and_answered_in_none() {
    let mut counts = Vec::new();
    for rules in [1, 5] {
        let value = record(rules);
        let (link, count) = allocations(|| record::decode(&value).unwrap());
        counts.push(count);

        let view = link.view();
        let click = Click {
            now_unix: 1_800_000_000,
            user_agent: b"Mozilla/5.0 (Linux; Android 14) Mobile",
            accept_language: b"en-GB,en;q=0.9",
            query: b"utm_source=push",
            client: Some("203.0.113.9".parse().unwrap()),
            visitor: 42,
            recipient: None,
            cookies: b"",
            random: 7,
        };
        let (answer, count) =
            allocations(|| view.answer(1_800_000_000, || click, |_| Some(*b"US")));
        assert_eq!(count, 0, "answering allocated");
        if rules == 5 {
            // None of the first four holds: the split answers.
            assert!(
                matches!(answer, record::Answer::Redirect { chosen: Some(chosen), .. } if chosen.rule == 4),
                "{answer:?}"
            );
        }
    }
    assert_eq!(counts, [3, 3], "allocations to decode one and five rules");
}
