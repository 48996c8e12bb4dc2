//! Sweeps the visit consumer noticed, published for the capped path (issue 78, docs/BOTS.md,
//! "7. Sweeps"). Hindsight sees a sweep only once five of its visits came; from then on the
//! consumer writes a [`Flag`] (the sweep's workspace, network and agent) into the hash
//! [`crate::keys::SWEEPS`] for [`FLAG_MS`] after the sweep's latest visit, and the module (each
//! worker keeps a copy, read again every few hundred milliseconds) calls a capped click of that
//! workspace from that network with that agent a scanner's: answered as a person's, its cap not
//! spent.
//!
//! A flag names its workspace because a workspace can fake a sweep of its own links (send itself
//! a campaign, fetch it from a chosen network with a chosen agent): evidence one workspace makes
//! must not switch caps off on another's links. Within a workspace a sweep is evidence about the
//! network and agent, whatever the campaign: a carrier's SMS firewall scans every message of the
//! brand that crosses it.

use crate::event::MAX_UA;
use crate::record::WorkspaceName;
use std::net::{IpAddr, Ipv6Addr};

/// How long a noticed sweep protects caps after its latest visit: the sweep's own window (a
/// visit within 10 s of the last continues it) and then some, so that a scanner pausing between
/// two batches of messages is still known, and a person behind the same address and agent later
/// on is not judged by it for long.
pub const FLAG_MS: i64 = 60_000;

/// Flags a worker keeps at most: a reply with more is cut there (the rest spend caps as before).
pub const MAX_FLAGS: usize = 10_000;

/// The network a sweep is told by: the /24 of an IPv4 address, the /48 of an IPv6 one (a
/// scanner's fleet spreads over neighbouring addresses); the visit store's anonymised address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Network(u128);

impl Network {
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Network(u128::from(v4.to_ipv6_mapped()) & !0xff),
            IpAddr::V6(v6) => Network(u128::from(v6) & !((1u128 << 80) - 1)),
        }
    }

    /// The network's first address as text (`203.0.113.0`, `2001:db8:abcd::`).
    pub fn text(self) -> String {
        IpAddr::V6(Ipv6Addr::from(self.0))
            .to_canonical()
            .to_string()
    }

    pub fn parse(text: &[u8]) -> Option<Self> {
        let ip: IpAddr = std::str::from_utf8(text).ok()?.parse().ok()?;
        Some(Network::of(ip))
    }
}

/// The key of a user agent in a flag: a 64-bit hash of its first [`MAX_UA`] bytes (what a visit
/// event carries). Two agents sharing a key share a flag; a client choosing its agent could only
/// get the treatment of another agent it could have sent itself.
pub fn agent_key(ua: &[u8]) -> u64 {
    crate::agent_cache::hash(&ua[..ua.len().min(MAX_UA)])
}

/// A sweep noticed: a field of [`crate::keys::SWEEPS`], its value the Unix ms it lasts until.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flag {
    pub workspace: WorkspaceName,
    pub network: Network,
    /// [`agent_key`] of the sweep's user agent.
    pub agent: u64,
}

impl Flag {
    /// `<workspace>\n<network>\n<agent key, 16 hex digits>`: readable by an operator
    /// (`HGETALL sl:sw`), and none of the parts holds a newline.
    pub fn field(&self) -> String {
        format!(
            "{}\n{}\n{:016x}",
            self.workspace.as_str(),
            self.network.text(),
            self.agent
        )
    }

    pub fn parse(field: &[u8]) -> Option<Self> {
        let mut parts = field.split(|&b| b == b'\n');
        let workspace = WorkspaceName::parse(parts.next()?)?;
        let network = Network::parse(parts.next()?)?;
        let agent = parts.next()?;
        if agent.len() != 16 || parts.next().is_some() {
            return None;
        }
        let agent = u64::from_str_radix(std::str::from_utf8(agent).ok()?, 16).ok()?;
        Some(Flag {
            workspace,
            network,
            agent,
        })
    }
}

/// `EVAL PUBLISH_SCRIPT 1 sl:sw <now ms> <field> <until ms> [<field> <until ms>...]`: raises each
/// field's end (never lowers it: two consumers may publish one sweep), drops the fields past
/// `now`, and lets the key expire with its last flag. One key: one slot on a cluster.
pub const PUBLISH_SCRIPT: &str = "local now = tonumber(ARGV[1]) \
for i = 2, #ARGV - 1, 2 do \
  local held = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0') or 0 \
  if tonumber(ARGV[i + 1]) > held then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end \
end \
local all = redis.call('HGETALL', KEYS[1]) \
local last = 0 \
for i = 1, #all - 1, 2 do \
  local ends = tonumber(all[i + 1]) or 0 \
  if ends <= now then redis.call('HDEL', KEYS[1], all[i]) \
  elseif ends > last then last = ends end \
end \
if last > 0 then redis.call('PEXPIREAT', KEYS[1], last) end \
return last";

/// A worker's (or the fallback's) copy of the flags: read from an `HGETALL` reply's pairs.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    until: std::collections::HashMap<Flag, i64>,
}

impl Flags {
    /// The flags of `pairs` (field, value), those this version cannot read left out, at most
    /// [`MAX_FLAGS`].
    pub fn from_pairs<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Self {
        let mut until = std::collections::HashMap::new();
        for (field, value) in pairs {
            if until.len() == MAX_FLAGS {
                break;
            }
            let end = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            if let (Some(flag), Some(end)) = (Flag::parse(field), end) {
                until.insert(flag, end);
            }
        }
        Flags { until }
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }

    /// Raises each flag's end to its `until` (the consumer's own copy, a batch's sweeps at
    /// once), then drops those ended a [`FLAG_MS`] before the latest: one walk over the copy
    /// per batch. A walk per flag was quadratic: the copy holds a minute of sweeps, thousands
    /// (bench/results/system-cost-reclassified-2026-11-29-4.md).
    pub fn raise(&mut self, noticed: &[(Flag, i64)]) {
        for &(flag, until) in noticed {
            let end = self.until.entry(flag).or_insert(until);
            *end = (*end).max(until);
        }
        if let Some(latest) = noticed.iter().map(|&(_, until)| until).max() {
            self.until.retain(|_, end| *end > latest - FLAG_MS);
        }
    }

    /// Whether a click at `now_ms` on a link of `workspace` from `ip` with agent `ua` belongs to
    /// a sweep noticed.
    pub fn holds(&self, workspace: WorkspaceName, ip: IpAddr, ua: &[u8], now_ms: i64) -> bool {
        let flag = Flag {
            workspace,
            network: Network::of(ip),
            agent: agent_key(ua),
        };
        self.until.get(&flag).is_some_and(|end| now_ms <= *end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_flag_round_trips_and_names_its_network_as_the_visit_store_does() {
        let flag = Flag {
            workspace: "brand-a".parse().unwrap(),
            network: Network::of(ip("203.0.113.77")),
            agent: agent_key(b"Mozilla/5.0 (X11) Chrome/131.0.0.0"),
        };
        let field = flag.field();
        assert!(field.starts_with("brand-a\n203.0.113.0\n"), "{field}");
        assert_eq!(Flag::parse(field.as_bytes()), Some(flag));
        let v6 = Network::of(ip("2001:db8:abcd:1234::1"));
        assert_eq!(v6.text(), "2001:db8:abcd::");
        assert_eq!(Network::of(ip("::ffff:203.0.113.9")), flag.network);
        for bad in [
            "brand-a\n203.0.113.0",
            "Brand A\n203.0.113.0\n0000000000000001",
            "x\ny\n1",
        ] {
            assert_eq!(Flag::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn flags_hold_their_workspace_network_and_agent_until_they_end() {
        let chrome = b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/131.0.0.0 Safari/537.36";
        let brand: WorkspaceName = "brand-a".parse().unwrap();
        let flag = Flag {
            workspace: brand,
            network: Network::of(ip("198.51.100.20")),
            agent: agent_key(chrome),
        };
        let field = flag.field();
        let pairs = [
            (field.as_bytes(), &b"100000"[..]),
            (&b"garbage"[..], &b"100000"[..]),
        ];
        let flags = Flags::from_pairs(pairs.into_iter());
        let sweeper = ip("198.51.100.99");
        assert!(flags.holds(brand, sweeper, chrome, 100_000));
        assert!(!flags.holds(brand, sweeper, chrome, 100_001), "over");
        assert!(
            !flags.holds(brand, ip("198.51.101.1"), chrome, 0),
            "another /24"
        );
        assert!(
            !flags.holds(brand, sweeper, b"Mozilla/5.0 (iPhone)", 0),
            "another agent"
        );
        let other: WorkspaceName = "brand-b".parse().unwrap();
        assert!(!flags.holds(other, sweeper, chrome, 0), "another workspace");
        // An agent past what an event carries is keyed by what it carries.
        let long = [b'a'; MAX_UA + 10];
        assert_eq!(agent_key(&long), agent_key(&long[..MAX_UA]));
    }

    #[test]
    fn a_batch_of_flags_raises_each_never_lowers_and_drops_those_long_ended() {
        let chrome = b"Mozilla/5.0 Chrome/131.0.0.0";
        let brand: WorkspaceName = "brand-a".parse().unwrap();
        let flag = |net: &str| Flag {
            workspace: brand,
            network: Network::of(ip(net)),
            agent: agent_key(chrome),
        };
        let (old, kept, raised) = (flag("192.0.2.1"), flag("198.51.100.1"), flag("203.0.113.1"));
        let mut flags = Flags::default();
        flags.raise(&[(old, 10_000), (raised, 70_000), (kept, 50_000)]);
        // A batch names a flag twice when two tracks of one workspace, network and agent
        // (two campaigns) swept; a lower end met later never shortens it.
        flags.raise(&[(raised, 90_000), (raised, 80_000), (kept, 40_000)]);
        let holds = |f: Flag, at| flags.holds(brand, ip(&f.network.text()), chrome, at);
        assert!(holds(raised, 90_000) && !holds(raised, 90_001));
        assert!(holds(kept, 50_000), "its end kept");
        // Ended more than FLAG_MS before the batch's latest end: dropped, not just past.
        assert!(!holds(old, 0), "dropped");
        assert_eq!(flags.until.len(), 2);
    }
}
