//! A position in the visit feed: `<seq>-<index>` names the next event to read, index `index`
//! (from 0) of the feed row `seq`. The cursor of an event is the one just after it, so resuming
//! from it never repeats the event; `0-0` is the start of the feed.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub seq: i64,
    pub index: i64,
}

impl Cursor {
    /// Before every row after `seq`: where a subscription made now starts.
    pub fn after_row(seq: i64) -> Self {
        Cursor {
            seq: seq + 1,
            index: 0,
        }
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.seq, self.index)
    }
}

impl FromStr for Cursor {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let (seq, index) = text.split_once('-').ok_or(())?;
        // Digits only: `+1` or ` 1` are not cursors the sidecar wrote.
        let number = |part: &str| -> Result<i64, ()> {
            if part.is_empty() || part.len() > 18 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(());
            }
            part.parse().map_err(|_| ())
        };
        Ok(Cursor {
            seq: number(seq)?,
            index: number(index)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    #[test]
    fn round_trips_and_refuses_what_it_never_writes() {
        let cursor = Cursor { seq: 42, index: 7 };
        assert_eq!(cursor.to_string().parse::<Cursor>(), Ok(cursor));
        for bad in [
            "",
            "1",
            "1-",
            "-1",
            "1-x",
            "+1-2",
            "1-2-3",
            " 1-2",
            "9999999999999999999-0",
        ] {
            assert_eq!(bad.parse::<Cursor>(), Err(()), "{bad:?}");
        }
        assert!(Cursor { seq: 1, index: 9 } < Cursor::after_row(1));
    }
}
