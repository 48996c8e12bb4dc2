use super::*;

fn m(text: &str) -> Measure {
    measure(text, &Options::default())
}

fn seg(text: &str) -> usize {
    m(text).segments
}

#[test]
fn capacities_follow_the_udh() {
    let c = |locking, single| Encoding::Gsm7 { locking, single }.capacity();
    assert_eq!(
        Encoding::GSM7.capacity(),
        Capacity {
            alone: 160,
            part: 153
        }
    );
    assert_eq!(
        Encoding::Ucs2.capacity(),
        Capacity {
            alone: 70,
            part: 67
        }
    );
    // One national IE: UDH 4 octets alone (5 septets), 9 in a part (11 septets).
    assert_eq!(
        c(None, Some(Language::Turkish)),
        Capacity {
            alone: 155,
            part: 149
        }
    );
    assert_eq!(
        c(Some(Language::Turkish), None),
        Capacity {
            alone: 155,
            part: 149
        }
    );
    // Two: 7 octets alone (8 septets), 12 in a part (14 septets).
    let both = c(Some(Language::Turkish), Some(Language::Turkish));
    assert_eq!(
        both,
        Capacity {
            alone: 152,
            part: 146
        }
    );
}

#[test]
fn gsm_boundaries() {
    assert_eq!(
        m(""),
        Measure {
            encoding: Encoding::GSM7,
            chars: 0,
            units: 0,
            segments: 1,
            replaced: false
        }
    );
    assert_eq!(seg(&"a".repeat(160)), 1);
    assert_eq!(seg(&"a".repeat(161)), 2);
    assert_eq!(seg(&"a".repeat(306)), 2);
    assert_eq!(seg(&"a".repeat(307)), 3);
    assert_eq!(seg(&"a".repeat(153 * 3)), 3);
    assert_eq!(seg(&"a".repeat(153 * 3 + 1)), 4);
}

#[test]
fn extension_characters_count_two() {
    for c in "\u{c}^{}\\[~]|€".chars() {
        let text = format!("{}{c}", "a".repeat(158));
        assert_eq!(m(&text).units, 160, "{c:?}");
        assert_eq!(m(&text).segments, 1, "{c:?}");
        let text = format!("{}{c}", "a".repeat(159));
        assert_eq!(m(&text).units, 161);
        assert_eq!(m(&text).segments, 2);
    }
}

#[test]
fn an_escape_never_parts_from_its_character() {
    // 152 septets, then € (2): the first part would be 154 > 153, so € starts part two.
    let text = format!("{}€{}", "a".repeat(152), "b".repeat(10));
    let a = analyze(&text, &Options::default());
    assert_eq!(a.parts.len(), 2);
    assert_eq!(a.parts[0].units, 152);
    assert_eq!(
        &a.text[a.parts[1].start..a.parts[1].end],
        &format!("€{}", "b".repeat(10))
    );
    // 151 + € = 153 fits exactly.
    let text = format!("{}€{}", "a".repeat(151), "b".repeat(10));
    assert_eq!(analyze(&text, &Options::default()).parts[0].units, 153);
    // A text of 306 septets that needs 3 parts because of the escape at the boundary.
    let text = format!("{}€{}", "a".repeat(152), "b".repeat(152));
    assert_eq!(m(&text).units, 306);
    assert_eq!(m(&text).segments, 3);
}

#[test]
fn ucs2_boundaries() {
    let u = |n: usize| "ж".repeat(n);
    assert_eq!(
        m(&u(70)),
        Measure {
            encoding: Encoding::Ucs2,
            chars: 70,
            units: 70,
            segments: 1,
            replaced: false
        }
    );
    assert_eq!(seg(&u(71)), 2);
    assert_eq!(seg(&u(134)), 2);
    assert_eq!(seg(&u(135)), 3);
    // One non-GSM character makes GSM characters UCS-2 too, and extension ones count one.
    let text = format!("{}ж", "{".repeat(69));
    assert_eq!(m(&text).units, 70);
    assert_eq!(m(&text).segments, 1);
}

#[test]
fn surrogate_pairs_count_two_and_stay_whole() {
    assert_eq!(m("😀").units, 2);
    assert_eq!(m("😀").chars, 1);
    assert_eq!(seg(&"😀".repeat(35)), 1);
    assert_eq!(seg(&format!("{}😀", "ж".repeat(69))), 2);
    // 66 units then a pair: 68 > 67, so the pair opens part two.
    let text = format!("{}😀{}", "ж".repeat(66), "ж".repeat(10));
    let a = analyze(&text, &Options::default());
    assert_eq!(a.parts.len(), 2);
    assert_eq!(a.parts[0].units, 66);
    assert!(a.text[a.parts[1].start..].starts_with('😀'));
    // 65 + pair = 67 fits.
    let text = format!("{}😀{}", "ж".repeat(65), "ж".repeat(10));
    assert_eq!(analyze(&text, &Options::default()).parts[0].units, 67);
    // 134 units that need a third part because a pair straddles 67.
    let text = format!("{}😀{}", "ж".repeat(66), "ж".repeat(66));
    assert_eq!(m(&text).units, 134);
    assert_eq!(m(&text).segments, 3);
}

#[test]
fn parts_cover_the_text() {
    let text = format!("{}€😀{}", "a".repeat(200), "ж".repeat(100));
    let a = analyze(&text, &Options::default());
    assert_eq!(a.parts.first().unwrap().start, 0);
    assert_eq!(a.parts.last().unwrap().end, a.text.len());
    for w in a.parts.windows(2) {
        assert_eq!(w[0].end, w[1].start);
    }
    assert_eq!(
        a.parts.iter().map(|p| p.units).sum::<usize>(),
        a.measure.units
    );
    assert!(a.parts.iter().all(|p| p.units <= 67));
}

#[test]
fn forced_ucs2_lists_characters_and_positions() {
    let a = analyze("Hi ж and 😀!", &Options::default());
    assert_eq!(a.measure.encoding, Encoding::Ucs2);
    assert_eq!(
        a.forced_ucs2,
        vec![
            Forced {
                ch: 'ж',
                position: 3
            },
            Forced {
                ch: '😀',
                position: 9
            }
        ]
    );
    assert!(analyze("Hi", &Options::default()).forced_ucs2.is_empty());
}

#[test]
fn lookalikes_are_replaced_only_when_asked_and_cheaper() {
    let text = "It’s “great” — see…";
    assert_eq!(m(text).encoding, Encoding::Ucs2);
    let options = Options {
        replace_lookalikes: true,
        ..Options::default()
    };
    let a = analyze(text, &options);
    assert_eq!(a.text, "It's \"great\" - see...");
    assert_eq!(a.measure.encoding, Encoding::GSM7);
    assert!(a.measure.replaced);
    assert_eq!(a.measure.units, 21);
    assert_eq!(
        a.replacements,
        vec![
            Replacement {
                position: 2,
                from: '’',
                to: "'"
            },
            Replacement {
                position: 5,
                from: '“',
                to: "\""
            },
            Replacement {
                position: 11,
                from: '”',
                to: "\""
            },
            Replacement {
                position: 13,
                from: '—',
                to: "-"
            },
            Replacement {
                position: 18,
                from: '…',
                to: "..."
            },
        ]
    );
    // With an emoji the text stays UCS-2 either way: nothing is replaced.
    let a = analyze("It’s 😀", &options);
    assert_eq!(a.text, "It’s 😀");
    assert!(a.replacements.is_empty());
    assert!(!a.measure.replaced);
}

#[test]
fn national_tables_are_used_only_when_allowed_and_cheaper() {
    let text = "Şeker ğ ı İ";
    assert_eq!(m(text).encoding, Encoding::Ucs2);
    let turkish = Options::default().with_language(Language::Turkish);
    let r = measure(text, &turkish);
    // Locking shift holds Ş ş ğ ı İ as one septet each; the single shift alone would escape.
    assert_eq!(
        r.encoding,
        Encoding::Gsm7 {
            locking: Some(Language::Turkish),
            single: None
        }
    );
    assert_eq!(r.units, 11);
    // Single shift only: 2 septets for each of Ş ğ ı İ.
    let single = Options {
        single_shift: LanguageSet::EMPTY.with(Language::Turkish),
        ..Options::default()
    };
    let r = measure(text, &single);
    assert_eq!(
        r.encoding,
        Encoding::Gsm7 {
            locking: None,
            single: Some(Language::Turkish)
        }
    );
    assert_eq!(r.units, 15);
    // Default text stays default (an IE would only cost).
    assert_eq!(measure("hello {x}", &turkish).encoding, Encoding::GSM7);
}

#[test]
fn national_capacity_boundaries() {
    let single = Options {
        single_shift: LanguageSet::EMPTY.with(Language::Spanish),
        ..Options::default()
    };
    // á is only in the Spanish single shift: 2 septets, one IE: 155 alone, 149 per part.
    let text = |n: usize| format!("á{}", "a".repeat(n - 2));
    let r = measure(&text(155), &single);
    assert_eq!(
        (r.encoding, r.units, r.segments),
        (
            Encoding::Gsm7 {
                locking: None,
                single: Some(Language::Spanish)
            },
            155,
            1
        )
    );
    assert_eq!(measure(&text(156), &single).segments, 2);
    assert_eq!(measure(&text(298), &single).segments, 2);
    assert_eq!(measure(&text(299), &single).segments, 3);
    // Both Portuguese tables: ∞ is only in its locking table, Φ is in its single shift but
    // not its locking table (nor the default extension table). Two IEs: 152 alone, 146 a part.
    let both = Options::default().with_language(Language::Portuguese);
    let text = |n: usize| format!("∞Φ{}", "a".repeat(n - 3));
    let r = measure(&text(152), &both);
    let pt = Some(Language::Portuguese);
    assert_eq!(
        (r.encoding, r.units, r.segments),
        (
            Encoding::Gsm7 {
                locking: pt,
                single: pt
            },
            152,
            1
        )
    );
    assert_eq!(measure(&text(153), &both).segments, 2);
    assert_eq!(measure(&text(292), &both).segments, 2);
    assert_eq!(measure(&text(293), &both).segments, 3);
}

#[test]
fn tables_of_two_languages_combine_or_give_ucs2_with_reasons() {
    // ı is only Turkish, ã only Portuguese: the Turkish locking table with the Portuguese
    // single shift holds both (as does the converse; ties go to the first found).
    let both = Options::default()
        .with_language(Language::Turkish)
        .with_language(Language::Portuguese);
    let r = measure("ı ã", &both);
    let (tr, pt) = (Some(Language::Turkish), Some(Language::Portuguese));
    assert_eq!(
        (r.encoding, r.units),
        (
            Encoding::Gsm7 {
                locking: tr,
                single: pt
            },
            4
        )
    );
    // ı is in no allowed table: it is the reason.
    let pt_locking = Options {
        locking_shift: LanguageSet::EMPTY.with(Language::Portuguese),
        ..Options::default()
    };
    let a = analyze("ı∞", &pt_locking);
    assert_eq!(a.measure.encoding, Encoding::Ucs2);
    assert_eq!(
        a.forced_ucs2,
        vec![Forced {
            ch: 'ı',
            position: 0
        }]
    );
    // Each is in an allowed locking table, but only one locking table can be used.
    let lockings = Options {
        locking_shift: LanguageSet::EMPTY
            .with(Language::Turkish)
            .with(Language::Portuguese),
        ..Options::default()
    };
    let a = analyze("ı∞", &lockings);
    assert_eq!(a.measure.encoding, Encoding::Ucs2);
    assert_eq!(
        a.forced_ucs2,
        vec![
            Forced {
                ch: 'ı',
                position: 0
            },
            Forced {
                ch: '∞',
                position: 1
            }
        ]
    );
}

#[test]
fn indian_locking_tables_take_one_septet_per_character() {
    let text = "नमस्ते, दुनिया";
    assert_eq!(m(text).encoding, Encoding::Ucs2);
    assert_eq!(m(text).units, 14);
    let hindi = Options::default().with_language(Language::Hindi);
    let r = measure(text, &hindi);
    assert_eq!(
        r.encoding,
        Encoding::Gsm7 {
            locking: Some(Language::Hindi),
            single: None
        }
    );
    assert_eq!((r.units, r.segments), (14, 1));
    // 155 Devanagari characters are one SMS with the Hindi table, three in UCS-2.
    let long = "नमस्ते ".repeat(22) + "नमस्";
    assert_eq!(long.chars().count(), 158);
    assert_eq!(m(&long).segments, 3);
    assert_eq!(measure(&long, &hindi).segments, 2);
    let long = "नमस्ते ".repeat(22) + "न";
    assert_eq!(long.chars().count(), 155);
    assert_eq!(measure(&long, &hindi).segments, 1);
    // Devanagari digits are only in the Hindi single shift: both tables, two IEs.
    let r = measure("नमस्ते १२३", &hindi);
    let hi = Some(Language::Hindi);
    assert_eq!(
        (r.encoding, r.units),
        (
            Encoding::Gsm7 {
                locking: hi,
                single: hi
            },
            13
        )
    );
}
