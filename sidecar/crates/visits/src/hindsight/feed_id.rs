//! A correction's place in the visit feed: the visit feed (`visit_feed`, read by the feed
//! endpoint and the click webhooks) gives a stored visit's reclassification its own id,
//! `rc_<audience before>_<visit id>`, next to the visits' ids and the conversions' (`cv_…`),
//! so a receiver that heard of the click as a person's hears that it no longer is, once.

use shortlink_visit_enrich::Audience;

const PREFIX: &str = "rc_";

/// The feed id of `visit_id`'s reclassification from `before`: the same id for the same change
/// (a visit is reclassified from a given verdict at most once: the correction applies only to a
/// visit still holding it).
pub fn reclassified_id(before: Audience, visit_id: &str) -> String {
    format!("{PREFIX}{}_{visit_id}", before.as_str())
}

/// The verdict before and the visit's id of a reclassification's feed id; `None` for any other
/// id (a visit's, a conversion's).
pub fn parse_reclassified_id(id: &str) -> Option<(Audience, &str)> {
    let (before, visit_id) = id.strip_prefix(PREFIX)?.split_once('_')?;
    Some((Audience::parse(before)?, visit_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_back() {
        let id = reclassified_id(Audience::Human, "1700000000000-3");
        assert_eq!(id, "rc_human_1700000000000-3");
        assert_eq!(
            parse_reclassified_id(&id),
            Some((Audience::Human, "1700000000000-3"))
        );
        assert_eq!(parse_reclassified_id("1700000000000-3"), None);
        assert_eq!(parse_reclassified_id("cv_abc"), None);
        assert_eq!(parse_reclassified_id("rc_robot_1-0"), None);
    }
}
