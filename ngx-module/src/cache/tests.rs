use super::*;

fn cache(capacity: usize) -> Cache {
    Cache::new(CacheConfig {
        capacity,
        ttl_ms: 10_000,
        negative_ttl_ms: 1_000,
    })
}

fn live(target: &[u8]) -> Link {
    Link::Live {
        status: 302,
        expires_at: 0,
        forward_query: false,
        target: target.into(),
        extras: None,
    }
}

fn link(n: u8) -> Cached {
    Cached::Link(live(&[b'a' + n]))
}

/// The answer a hit gives, owned, for comparisons.
fn get(c: &mut Cache, code: &[u8], now_ms: u64) -> Option<Cached> {
    Some(match c.get(code, now_ms)? {
        Hit::Missing => Cached::Missing,
        Hit::Link(l) if l.revoked => Cached::Link(l.to_link()),
        Hit::Link(l) => Cached::Link(Link::Live {
            status: l.status,
            expires_at: l.expires_at,
            forward_query: l.forward_query,
            target: l.target.into(),
            extras: l.extras.map(|extras| std::sync::Arc::new(extras.clone())),
        }),
    })
}

#[test]
fn hit_until_ttl_then_miss() {
    let mut c = cache(10);
    c.insert(b"abc", link(1), 0);
    assert_eq!(get(&mut c, b"abc", 9_999), Some(link(1)));
    assert_eq!(get(&mut c, b"abc", 10_000), None);
}

#[test]
fn misses_use_the_negative_ttl() {
    let mut c = cache(10);
    c.insert(b"nope", Cached::Missing, 100);
    assert_eq!(get(&mut c, b"nope", 1_099), Some(Cached::Missing));
    assert_eq!(get(&mut c, b"nope", 1_100), None);
}

#[test]
fn zero_ttl_disables_that_kind() {
    let mut c = Cache::new(CacheConfig {
        capacity: 10,
        ttl_ms: 10,
        negative_ttl_ms: 0,
    });
    c.insert(b"nope", Cached::Missing, 0);
    assert_eq!(c.len(), 0);
}

#[test]
fn size_is_bounded() {
    let mut c = cache(100);
    for i in 0..10_000u32 {
        c.insert(&i.to_be_bytes(), link(0), 0);
        assert!(c.len() <= 100);
    }
}

#[test]
fn hot_entries_survive_other_codes() {
    let mut c = cache(4); // two sets of two
    c.insert(b"hot", link(1), 0);
    for i in 0..50u32 {
        c.insert(&i.to_be_bytes(), link(2), 0);
        assert_eq!(get(&mut c, b"hot", 1), Some(link(1)), "after {i} inserts");
    }
}

#[test]
fn a_full_set_evicts_its_least_recently_used_way() {
    let mut c = cache(2); // one set
    c.insert(b"a", link(1), 0);
    c.insert(b"b", link(2), 0);
    assert!(c.get(b"a", 1).is_some()); // b is now the older one
    c.insert(b"c", link(3), 1);
    assert_eq!(get(&mut c, b"a", 2), Some(link(1)));
    assert_eq!(get(&mut c, b"b", 2), None);
    assert_eq!(get(&mut c, b"c", 2), Some(link(3)));
    assert_eq!(c.len(), 2);
}

#[test]
fn a_stale_way_is_replaced_before_a_fresh_one() {
    let mut c = cache(2);
    c.insert(b"old", Cached::Missing, 0); // stale from 1,000
    c.insert(b"new", link(1), 500);
    assert!(c.get(b"new", 600).is_some());
    c.insert(b"next", link(2), 1_500); // "new" was used last, but "old" is stale
    assert_eq!(get(&mut c, b"new", 1_600), Some(link(1)));
    assert_eq!(get(&mut c, b"next", 1_600), Some(link(2)));
}

#[test]
fn short_and_long_keys_and_targets_are_kept_apart() {
    let mut c = cache(100);
    let long = [b'x'; INLINE + 1];
    let keys = [&b"abc"[..], &long[..INLINE], &long[..], &[]];
    let targets = [
        &b"t"[..],
        &long[..INLINE - 3],
        &long[..1],
        &[b'y'; 3000][..],
    ];
    for (key, target) in keys.iter().zip(targets) {
        c.insert(key, Cached::Link(live(target)), 0);
    }
    for (key, target) in keys.iter().zip(targets) {
        assert_eq!(
            get(&mut c, key, 1),
            Some(Cached::Link(live(target))),
            "{} bytes",
            key.len()
        );
    }
    assert_eq!(c.get(b"abcd", 1), None);
    assert_eq!(c.get(&long[..INLINE - 1], 1), None);
    // Replacing spilled entries frees their blocks (checked by Miri / sanitizers) and keeps
    // the count of spilled slots right for Drop.
    for key in keys {
        c.insert(key, Cached::Missing, 2);
        assert_eq!(get(&mut c, key, 3), Some(Cached::Missing));
    }
    assert_eq!(
        c.spilled, 1,
        "only the code longer than INLINE still spills"
    );
}

#[test]
fn overlong_entries_are_not_cached() {
    let mut c = cache(10);
    let target = vec![b'z'; usize::from(u16::MAX)];
    c.insert(b"abc", Cached::Link(live(&target)), 0);
    assert_eq!(c.len(), 0);
    assert_eq!(c.get(b"abc", 1), None);
}

#[test]
fn remove_and_clear_forget_entries() {
    let mut c = cache(100);
    let long = Cached::Link(live(&[b'x'; 100]));
    c.insert(b"abc", link(1), 0);
    c.insert(b"def", long.clone(), 0);
    c.remove(b"abc");
    c.remove(b"zzz");
    assert_eq!(get(&mut c, b"abc", 1), None);
    assert_eq!(get(&mut c, b"def", 1), Some(long));
    assert_eq!((c.len(), c.spilled), (1, 1));
    c.clear();
    assert_eq!(get(&mut c, b"def", 1), None);
    assert_eq!((c.len(), c.spilled), (0, 0));
    c.insert(b"abc", link(2), 0);
    assert_eq!(get(&mut c, b"abc", 1), Some(link(2)));
}

#[test]
fn reinsert_replaces() {
    let mut c = cache(4);
    c.insert(b"a", link(1), 0);
    c.insert(b"b", link(1), 0);
    c.insert(b"c", link(1), 0);
    c.insert(b"a", link(3), 5);
    assert_eq!(get(&mut c, b"a", 6), Some(link(3)));
    assert!(c.len() <= 4);
}

#[test]
fn cached_links_answer_like_the_link() {
    let links = [
        live(b"https://example.com/x"),
        Link::Live {
            status: 301,
            expires_at: 100,
            forward_query: true,
            target: (*b"https://example.com/a-target-that-does-not-fit-inline").into(),
            extras: None,
        },
        Link::Revoked { workspace: None },
        Link::Revoked {
            workspace: Some(brand_a()),
        },
        Link::Quarantined { workspace: None },
        Link::Quarantined {
            workspace: Some(brand_a()),
        },
        with_extras(b"https://x.example/"),
    ];
    for link in links {
        let mut c = cache(10);
        c.insert(b"code", Cached::Link(link.clone()), 0);
        let Some(Hit::Link(cached)) = c.get(b"code", 1) else {
            panic!("no hit for {link:?}");
        };
        assert_eq!(cached.view(), link.view());
    }
}

fn brand_a() -> WorkspaceName {
    WorkspaceName::parse(b"brand-a").unwrap()
}

/// A cache hit names the workspace the link's record named (revoked or live, inline or
/// spilled), and a copy taken for a task keeps it.
#[test]
fn cached_links_keep_their_workspace() {
    let in_a = Link::Live {
        status: 302,
        expires_at: 0,
        forward_query: false,
        target: (*b"https://a.example/").into(),
        extras: Some(std::sync::Arc::new(Extras {
            workspace: Some(brand_a()),
            ..Extras::default()
        })),
    };
    let links = [
        live(b"https://example.com/x"),
        in_a,
        Link::Revoked { workspace: None },
        Link::Revoked {
            workspace: Some(brand_a()),
        },
        Link::Quarantined { workspace: None },
        Link::Quarantined {
            workspace: Some(brand_a()),
        },
    ];
    for code in [&b"code"[..], &[b'c'; 30]] {
        for link in &links {
            let mut c = cache(10);
            c.insert(code, Cached::Link(link.clone()), 0);
            let Some(Hit::Link(cached)) = c.get(code, 1) else {
                panic!("no hit for {link:?}");
            };
            let named = link.workspace().map(WorkspaceName::as_bytes);
            assert_eq!(cached.workspace(), named, "{link:?}");
            assert_eq!(&cached.to_link(), link);
            assert_eq!(cached.view(), link.view());
        }
    }
}

fn with_extras(target: &[u8]) -> Link {
    Link::Live {
        status: 307,
        expires_at: 0,
        forward_query: false,
        target: target.into(),
        extras: Some(std::sync::Arc::new(Extras {
            valid_since: 5,
            expired_url: Some((*b"https://x.example/over").into()),
            ..Extras::default()
        })),
    }
}

#[test]
fn links_with_extras_keep_them_until_replaced_or_removed() {
    let mut c = cache(10);
    // Short enough to fit inline, but kept with its extras on the heap.
    let ruled = with_extras(b"https://x.example/");
    c.insert(b"k", Cached::Link(ruled.clone()), 0);
    assert_eq!(c.spilled, 1);
    assert_eq!(get(&mut c, b"k", 1), Some(Cached::Link(ruled)));
    // Replaced by a plain link: both heap blocks go.
    c.insert(b"k", link(2), 0);
    assert_eq!(c.spilled, 0);
    assert_eq!(get(&mut c, b"k", 1), Some(link(2)));
    c.insert(b"k", Cached::Link(with_extras(b"https://y.example/")), 0);
    c.remove(b"k");
    assert_eq!((c.len(), c.spilled), (0, 0));
}

#[test]
fn large_tables_start_untouched_and_aligned() {
    let mut c = cache(200_000); // 12.8 MB: spans several huge-page extents
    assert_eq!(c.table.sets.as_ptr() as usize % 128, 0);
    c.insert(b"abc", link(1), 0);
    assert_eq!(get(&mut c, b"abc", 1), Some(link(1)));
}

#[test]
fn imported_entries_answer_imported_locations_only() {
    // The hash is seeded per process and a set has two ways: with 5 sets (capacity 10) the three
    // codes below shared one set in 4% of runs and one was evicted. With 2,048 sets that takes a
    // seed in four million.
    let mut c = cache(4096);
    c.insert_in(b"1", link(1), 0, Scope::Imported);
    c.insert_in(b"2", Cached::Missing, 0, Scope::Imported);
    assert_eq!(
        get(&mut c, b"1", 1),
        None,
        "a plain location takes the shape check"
    );
    assert_eq!(get(&mut c, b"2", 1), None);
    assert!(matches!(
        c.get_in(b"1", 1, Scope::Imported),
        Some(Hit::Link(l)) if l.target == b"b"
    ));
    assert_eq!(c.get_in(b"2", 1, Scope::Imported), Some(Hit::Missing));
    // An entry for every location answers imported ones too.
    c.insert(b"abc", link(3), 0);
    assert!(c.get_in(b"abc", 1, Scope::Imported).is_some());
    // A lookup a plain location makes (e.g. while the check character is not trusted) widens
    // the entry; one an imported location makes narrows it again.
    c.insert(b"1", link(4), 0);
    assert_eq!(get(&mut c, b"1", 1), Some(link(4)));
    c.insert_in(b"1", link(4), 0, Scope::Imported);
    assert_eq!(get(&mut c, b"1", 1), None);
    assert_eq!(c.len(), 3);
}

#[test]
fn the_imported_flag_leaves_recency_alone() {
    // One set of two ways: every code lands in it.
    let mut c = cache(2);
    c.insert_in(b"a", link(1), 0, Scope::Imported);
    c.insert(b"b", link(2), 0);
    // `a` is least recent: a third code replaces it, not `b`.
    c.insert(b"c", link(3), 0);
    assert_eq!(get(&mut c, b"b", 1), Some(link(2)));
    assert_eq!(c.get_in(b"a", 1, Scope::Imported), None);
    // Way 0's recency bit shares the flags byte: the imported flag must not disturb it.
    assert!(c.get_in(b"c", 1, Scope::Imported).is_some());
    c.insert_in(b"d", link(4), 0, Scope::Imported);
    assert_eq!(get(&mut c, b"b", 1), None, "least recent, replaced");
    assert_eq!(get(&mut c, b"c", 1), Some(link(3)));
    assert!(c.get_in(b"d", 1, Scope::Imported).is_some());
    assert_eq!(get(&mut c, b"d", 1), None);
}
