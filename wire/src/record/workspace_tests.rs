//! Records of links of a workspace other than `default`: round trips, what a reader refuses, and
//! that `default`'s records keep their bytes.

use super::*;

fn brand_a() -> WorkspaceName {
    WorkspaceName::parse(b"brand-a").unwrap()
}

fn live(extras: &Extras) -> Vec<u8> {
    Record::Live {
        status: 302,
        expires_at: 0,
        flags: 0,
        target: "https://shop.example/",
        extras: Some(extras),
    }
    .encode()
}

fn in_workspace(workspace: Option<WorkspaceName>) -> Extras {
    Extras {
        workspace,
        ..Extras::default()
    }
}

#[test]
fn default_links_keep_their_version_1_bytes() {
    for workspace in [None, Some(WorkspaceName::DEFAULT)] {
        assert_eq!(
            live(&in_workspace(workspace)),
            b"1|L|302|0|0|https://shop.example/"
        );
        assert_eq!(Record::revoked(workspace).encode(), TOMBSTONE.as_bytes());
    }
    assert_eq!(
        Record::RevokedIn(WorkspaceName::DEFAULT).encode(),
        TOMBSTONE.as_bytes()
    );
}

#[test]
fn a_plain_link_of_another_workspace_is_version_2_with_the_name_only() {
    let value = live(&in_workspace(Some(brand_a())));
    assert_eq!(
        value,
        b"2|L|302|0|0|https://shop.example/\nw\x00\x07brand-a"
    );
    let link = decode(&value).unwrap();
    assert_eq!(link.workspace(), Some(&brand_a()));
    let Link::Live { extras, .. } = &link else {
        panic!("{link:?}")
    };
    assert_eq!(extras.as_deref(), Some(&in_workspace(Some(brand_a()))));
    // It answers as the same link of `default` does.
    let now = 1_000;
    let default = decode(b"1|L|302|0|0|https://shop.example/").unwrap();
    let never = || -> crate::rules::Click<'static> { panic!("no rule to evaluate") };
    assert_eq!(
        link.view().answer(now, never, |_| None),
        default.view().answer(now, never, |_| None)
    );
}

#[test]
fn the_workspace_travels_with_the_other_extras() {
    let extras = Extras {
        valid_since: 10,
        max_visits: 3,
        has_card: true,
        workspace: Some(brand_a()),
        ..Extras::default()
    };
    let link = decode(&live(&extras)).unwrap();
    assert_eq!(link.workspace(), Some(&brand_a()));
    let Link::Live {
        extras: Some(decoded),
        ..
    } = &link
    else {
        panic!("{link:?}")
    };
    assert_eq!(**decoded, extras);
}

#[test]
fn a_revoked_link_of_another_workspace_names_it() {
    let value = Record::revoked(Some(brand_a())).encode();
    assert_eq!(value, b"2|R|410|0|0|\nw\x00\x07brand-a");
    let link = decode(&value).unwrap();
    assert_eq!(
        link,
        Link::Revoked {
            workspace: Some(brand_a())
        }
    );
    assert_eq!(link.workspace(), Some(&brand_a()));
    assert!(link.view().revoked);
}

#[test]
fn records_from_before_workspaces_are_of_default() {
    for value in [
        &b"1|L|302|0|0|https://shop.example/"[..],
        b"1|R|410|0|0|",
        b"2|L|302|0|0|https://shop.example/\nc\x00\x00",
    ] {
        assert_eq!(decode(value).unwrap().workspace(), None);
    }
    // Written by no one, read as `default` all the same.
    let named_default = b"2|L|302|0|0|https://shop.example/\nw\x00\x07default";
    assert_eq!(decode(named_default).unwrap().workspace(), None);
}

#[test]
fn a_bad_workspace_name_is_refused() {
    let long = "x".repeat(33);
    for name in [
        "",
        "Brand-A",
        "-a",
        "brand_a",
        "brand a",
        "é",
        long.as_str(),
    ] {
        let mut value = b"2|L|302|0|0|https://shop.example/\nw".to_vec();
        value.extend((name.len() as u16).to_be_bytes());
        value.extend(name.as_bytes());
        assert_eq!(decode(&value), Err(RecordError::Workspace), "{name:?}");
        let mut tombstone = b"2|R|410|0|0|\nw".to_vec();
        tombstone.extend((name.len() as u16).to_be_bytes());
        tombstone.extend(name.as_bytes());
        assert_eq!(decode(&tombstone), Err(RecordError::Workspace), "{name:?}");
    }
    let twice = b"2|L|302|0|0|https://shop.example/\nw\x00\x01aw\x00\x01b";
    assert_eq!(decode(twice), Err(RecordError::Extras));
}

#[test]
fn a_tombstone_carries_nothing_but_its_workspace() {
    assert_eq!(
        decode(b"2|R|410|0|0|\nw\x00\x07brand-as\x00\x08\x00\x00\x00\x00\x00\x00\x00\x01"),
        Err(RecordError::State)
    );
    assert_eq!(
        decode(b"2|R|302|0|0|\nw\x00\x07brand-a"),
        Err(RecordError::Status)
    );
}

#[test]
fn a_quarantined_link_is_a_tombstone_of_state_q_that_answers_the_warning_page() {
    assert_eq!(Record::Quarantined(None).encode(), QUARANTINED.as_bytes());
    assert_eq!(
        Record::Quarantined(Some(WorkspaceName::DEFAULT)).encode(),
        QUARANTINED.as_bytes()
    );
    let value = Record::Quarantined(Some(brand_a())).encode();
    assert_eq!(value, b"2|Q|451|0|0|\nw\x00\x07brand-a");
    for (value, workspace) in [
        (value.clone(), Some(brand_a())),
        (QUARANTINED.as_bytes().to_vec(), None),
    ] {
        let link = decode(&value).unwrap();
        assert_eq!(link, Link::Quarantined { workspace });
        let view = link.view();
        assert_eq!(
            (view.revoked, view.status, view.target),
            (true, 451, &[][..])
        );
        let answer = view.answer(0, || panic!("no rule"), |_| panic!("no country"));
        assert_eq!(answer, Answer::Quarantined);
    }
    // Only 451 goes with `Q`, and a quarantine names nothing but its workspace.
    assert_eq!(decode(b"1|Q|410|0|0|"), Err(RecordError::Status));
    assert_eq!(
        decode(b"2|Q|451|0|0|\nc\x00\x00w\x00\x07brand-a"),
        Err(RecordError::State)
    );
    // A revoke still answers 410.
    assert_eq!(
        Link::Revoked { workspace: None }.view().answer(
            0,
            || panic!("no rule"),
            |_| panic!("no country")
        ),
        Answer::Gone
    );
}
