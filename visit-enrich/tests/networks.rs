//! The visit pipeline judges a client's network with the hosting list (`shortlink_wire::network`).

use shortlink_wire::network::{AsnTable, HostingList, Networks};

#[test]
fn a_person_s_agent_from_a_hosting_network_is_a_scanner() {
    use shortlink_visit_enrich::{Audience, Enricher, GeoDb, VisitEvent};
    let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
    let event = |ip: &str, ua: &str| {
        let fields = [
            ("c", "abc"),
            ("t", "1700000000000"),
            ("ip", ip),
            ("ua", ua),
            ("sig", "0"),
        ];
        VisitEvent::from_fields("1-0", fields.map(|(k, v)| (k, v.to_owned()))).unwrap()
    };
    let mut list = HostingList::default();
    list.extend("198.51.100.0/24").unwrap();
    let enricher = Enricher::new(GeoDb::disabled(), false)
        .with_networks(Networks::new(AsnTable::default(), list));
    let cloud = enricher.enrich(&event("198.51.100.7", chrome));
    assert_eq!(cloud.agent.audience, Audience::Scanner);
    assert_eq!(cloud.reasons.0, shortlink_wire::verdict::Reasons::NETWORK);
    let home = enricher.enrich(&event("192.0.2.7", chrome));
    assert_eq!(home.agent.audience, Audience::Human);
    // A machine's own agent decides first; without networks nothing is judged by them.
    let bot = enricher.enrich(&event("198.51.100.7", "curl/8.5.0"));
    assert_eq!(bot.agent.audience, Audience::Bot);
    let plain = Enricher::new(GeoDb::disabled(), false).enrich(&event("198.51.100.7", chrome));
    assert_eq!(plain.agent.audience, Audience::Human);
}
