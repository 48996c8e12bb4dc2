//! The SQLite visit batch written through the connection's own handle (issue 38): the only
//! `unsafe` of the visit stores, and the only place that calls SQLite directly.
//!
//! Through sqlx, each bound value was copied into an owned argument, handed to the connection's
//! worker thread with its statement, and copied again by SQLite (`SQLITE_TRANSIENT`, a malloc and a
//! free per value), about 22 values per visit: beside SQLite's own work, most of the consumer's CPU
//! per visit (bench/results/visit-consumer-cpu-2026-11-25.md). Here the handle is locked out of the
//! worker ([`with_handle`], `SqliteConnection::lock_handle`), the batch's statements are prepared
//! once per lock and each row is bound in place (`SQLITE_STATIC`: SQLite reads the caller's bytes;
//! [`Statement`]'s `'v` keeps them alive as long as the statement may read them) and stepped on the
//! calling thread.
//!
//! Statements write one row each: without the per-statement hand-off a row costs about the same
//! alone as in a multi-row `VALUES`, a one-row statement needs no statement journal, and
//! `sqlite3_changes` says whether the row went in, so which visits were already stored (a
//! redelivery) is known without a savepoint and a second insert `RETURNING` them.
//!
//! Everything here runs inside the transaction the caller began through sqlx (`BEGIN IMMEDIATE`)
//! and commits through sqlx; these functions only step statements within it.

#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::corrections::{leaves_people, Applied};
use libsqlite3_sys as ffi;
use shortlink_store::{StorageError, StorageResult};
use shortlink_visit_enrich::Visit;
use shortlink_visits::hindsight::Correction;
use shortlink_visits::rollup::{Audiences, Deltas, NewVisitors};
use sqlx::error::{DatabaseError, ErrorKind};
use sqlx::sqlite::SqliteConnection;
use std::borrow::Cow;
use std::ffi::{c_int, CStr};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// The connection's handle, locked out of sqlx's worker thread while it lives.
pub(super) struct Handle<'l> {
    db: NonNull<ffi::sqlite3>,
    _locked: PhantomData<&'l mut ()>,
}

/// Runs `write` with the connection's handle locked out of its worker thread. No other statement
/// runs on the connection meanwhile (the worker waits for the lock), and nothing here is held
/// across an `.await`: `write` runs synchronously on the calling thread. Callers keep each call to
/// a few thousand rows (milliseconds), so the runtime thread is not held for a whole batch.
pub(super) async fn with_handle<R>(
    connection: &mut SqliteConnection,
    write: impl FnOnce(&Handle<'_>) -> StorageResult<R>,
) -> StorageResult<R> {
    let mut locked = connection
        .lock_handle()
        .await
        .map_err(StorageError::classify)?;
    let handle = Handle {
        db: locked.as_raw_handle(),
        _locked: PhantomData,
    };
    // `handle` (and every statement prepared on it) ends here, before `locked` gives the
    // connection back to the worker.
    write(&handle)
}

impl Handle<'_> {
    /// Prepares one statement (finalized when dropped).
    fn prepare<'v>(&self, sql: &str) -> StorageResult<Statement<'_, 'v>> {
        let len = c_int::try_from(sql.len())
            .map_err(|_| StorageError::Corrupt("statement too long".into()))?;
        let mut stmt = std::ptr::null_mut();
        // SAFETY: `self.db` is the open connection, locked out of its worker thread for as long
        // as `self` lives; `sql` is valid for `len` bytes (SQLite copies what it keeps), `stmt`
        // is a valid out-pointer, and a null tail pointer is allowed.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                self.db.as_ptr(),
                sql.as_ptr().cast(),
                len,
                0,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(self.error());
        }
        let stmt = NonNull::new(stmt)
            .ok_or_else(|| StorageError::Corrupt(format!("empty statement: {sql}")))?;
        Ok(Statement {
            stmt,
            handle: self,
            bind_error: ffi::SQLITE_OK,
            _values: PhantomData,
        })
    }

    /// The connection's last error, as sqlx would report it (same codes, so
    /// [`StorageError::classify`] sorts it the same way).
    fn error(&self) -> StorageError {
        // SAFETY: the connection is open and locked (see `prepare`); `sqlite3_errmsg` returns a
        // NUL-terminated string owned by SQLite, valid until the next call on the connection,
        // and copied out before it.
        let (code, message) = unsafe {
            let code = ffi::sqlite3_extended_errcode(self.db.as_ptr());
            let message = CStr::from_ptr(ffi::sqlite3_errmsg(self.db.as_ptr()));
            (code, message.to_string_lossy().into_owned())
        };
        StorageError::classify(sqlx::Error::Database(Box::new(RawSqliteError {
            code,
            message,
        })))
    }
}

/// A prepared statement; values bound to it live at least as long as `'v`, so SQLite may keep
/// pointers to them (`SQLITE_STATIC`) until they are bound again or the statement is finalized.
struct Statement<'h, 'v> {
    stmt: NonNull<ffi::sqlite3_stmt>,
    handle: &'h Handle<'h>,
    /// The first failed bind since the last step, reported by [`Statement::execute`].
    bind_error: c_int,
    _values: PhantomData<&'v [u8]>,
}

/// What an empty text or blob is bound as: SQLite is given a real (one-byte) buffer rather than
/// Rust's dangling pointer of an empty slice, and reads none of it.
const EMPTY: &[u8; 1] = b"\0";

impl<'v> Statement<'_, 'v> {
    fn check(&mut self, rc: c_int) {
        if rc != ffi::SQLITE_OK && self.bind_error == ffi::SQLITE_OK {
            self.bind_error = rc;
        }
    }

    fn int(&mut self, index: c_int, value: i64) {
        // SAFETY: `stmt` is a live statement of the locked connection; an out-of-range index is
        // reported by the return code, not undefined.
        let rc = unsafe { ffi::sqlite3_bind_int64(self.stmt.as_ptr(), index, value) };
        self.check(rc);
    }

    fn null(&mut self, index: c_int) {
        // SAFETY: as in `int`.
        let rc = unsafe { ffi::sqlite3_bind_null(self.stmt.as_ptr(), index) };
        self.check(rc);
    }

    fn opt_int(&mut self, index: c_int, value: Option<i64>) {
        match value {
            Some(value) => self.int(index, value),
            None => self.null(index),
        }
    }

    fn bytes(&mut self, index: c_int, value: &'v [u8], text: bool) {
        let Ok(len) = c_int::try_from(value.len()) else {
            self.check(ffi::SQLITE_TOOBIG);
            return;
        };
        let ptr = if value.is_empty() {
            EMPTY.as_ptr()
        } else {
            value.as_ptr()
        };
        // SAFETY: `stmt` is live (as in `int`); `ptr` is valid for `len` bytes for `'v`, which
        // outlives this statement (its type says so), so with `SQLITE_STATIC` SQLite may read
        // them at any step until the parameter is bound again or the statement is finalized.
        // Texts are `&str`, so UTF-8 as `sqlite3_bind_text` expects.
        let rc = unsafe {
            if text {
                ffi::sqlite3_bind_text(
                    self.stmt.as_ptr(),
                    index,
                    ptr.cast(),
                    len,
                    ffi::SQLITE_STATIC(),
                )
            } else {
                ffi::sqlite3_bind_blob(
                    self.stmt.as_ptr(),
                    index,
                    ptr.cast(),
                    len,
                    ffi::SQLITE_STATIC(),
                )
            }
        };
        self.check(rc);
    }

    fn text(&mut self, index: c_int, value: &'v str) {
        self.bytes(index, value.as_bytes(), true);
    }

    fn opt_text(&mut self, index: c_int, value: Option<&'v str>) {
        match value {
            Some(value) => self.text(index, value),
            None => self.null(index),
        }
    }

    fn blob(&mut self, index: c_int, value: &'v [u8]) {
        self.bytes(index, value, false);
    }

    /// Runs the statement (one that returns no rows) with the values bound; true when it changed
    /// a row (an insert `ON CONFLICT DO NOTHING`: the row was new).
    fn execute(&mut self) -> StorageResult<bool> {
        let db = self.handle.db.as_ptr();
        if self.bind_error != ffi::SQLITE_OK {
            self.bind_error = ffi::SQLITE_OK;
            return Err(StorageError::Corrupt("binding a visit value failed".into()));
        }
        // SAFETY: `stmt` is a live statement of the locked connection with every parameter
        // bound to a value that outlives it (see `bytes`).
        let rc = unsafe { ffi::sqlite3_step(self.stmt.as_ptr()) };
        let result = if rc == ffi::SQLITE_DONE {
            // SAFETY: the connection is open and locked.
            Ok(unsafe { ffi::sqlite3_changes(db) } > 0)
        } else {
            Err(self.handle.error())
        };
        // SAFETY: `stmt` is live; resetting a statement that failed or finished is allowed (its
        // return code repeats the step's error, already taken above).
        unsafe { ffi::sqlite3_reset(self.stmt.as_ptr()) };
        result
    }
}

impl Drop for Statement<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: `stmt` was prepared on this locked connection and is finalized once, here;
        // the handle (and so the lock) outlives the statement (`'h`).
        unsafe { ffi::sqlite3_finalize(self.stmt.as_ptr()) };
    }
}

/// An error SQLite reported on the raw handle, with its extended result code as sqlx's own
/// SQLite error gives it.
#[derive(Debug)]
struct RawSqliteError {
    code: c_int,
    message: String,
}

impl std::fmt::Display for RawSqliteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RawSqliteError {}

impl DatabaseError for RawSqliteError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

/// Inserts `visits` (ids distinct) unless already stored, appending those inserted to `inserted`
/// in order.
pub(super) fn insert_visits<'v>(
    handle: &Handle<'_>,
    visits: &[&'v Visit],
    inserted: &mut Vec<&'v Visit>,
) -> StorageResult<()> {
    let sql = format!(
        "INSERT INTO visits ({}) VALUES ({}) ON CONFLICT (event_id) DO NOTHING",
        super::VISIT_COLUMNS,
        vec!["?"; super::VISIT_COLUMN_COUNT].join(", ")
    );
    let mut insert = handle.prepare(&sql)?;
    for &v in visits {
        // In VISIT_COLUMNS' order.
        let text = |value: &'v Option<String>| value.as_deref();
        insert.text(1, &v.event_id);
        insert.text(2, &v.code);
        insert.int(3, v.time_ms);
        insert.opt_int(4, v.status.map(i64::from));
        insert.opt_text(5, text(&v.ip));
        insert.blob(6, &v.visitor);
        insert.opt_int(7, v.user_agent_id);
        insert.opt_text(8, text(&v.agent.browser));
        insert.opt_text(9, text(&v.agent.browser_version));
        insert.opt_text(10, text(&v.agent.os));
        insert.opt_text(11, text(&v.agent.os_version));
        insert.text(12, v.agent.device.as_str());
        insert.text(13, v.agent.audience.as_str());
        insert.opt_text(14, v.agent.agent_label);
        insert.opt_text(15, text(&v.country));
        insert.opt_text(16, text(&v.region));
        insert.opt_text(17, text(&v.city));
        insert.opt_text(18, text(&v.isp));
        insert.opt_text(19, text(&v.referrer_host));
        insert.opt_text(20, text(&v.short_domain));
        insert.opt_text(21, text(&v.language));
        insert.opt_text(22, text(&v.rule));
        insert.int(23, i64::from(v.reasons.0));
        if insert.execute()? {
            inserted.push(v);
        }
    }
    Ok(())
}

/// Stores the user agents the visits refer to that are not stored yet.
pub(super) fn insert_user_agents(handle: &Handle<'_>, agents: &[(i64, &str)]) -> StorageResult<()> {
    let mut insert = handle
        .prepare("INSERT INTO user_agents (id, agent) VALUES (?, ?) ON CONFLICT (id) DO NOTHING")?;
    for (id, agent) in agents {
        insert.int(1, *id);
        insert.text(2, agent);
        insert.execute()?;
    }
    Ok(())
}

/// Inserts the (code, visitor, first seen) rows not yet known; adds those that were new to `new`.
pub(super) fn insert_visitors(
    handle: &Handle<'_>,
    pairs: &[(&str, &[u8; 16], i64)],
    new: &mut NewVisitors,
) -> StorageResult<()> {
    let mut insert = handle.prepare(
        "INSERT INTO link_visitors (code, visitor, first_seen) VALUES (?, ?, ?) \
         ON CONFLICT (code, visitor) DO NOTHING",
    )?;
    for &(code, visitor, at) in pairs {
        insert.text(1, code);
        insert.blob(2, visitor);
        insert.int(3, at);
        if insert.execute()? {
            // A code's string is allocated once per batch, not once per new visitor.
            match new.get_mut(code) {
                Some(visitors) => visitors.insert(visitor.to_vec()),
                None => (new.entry(code.to_owned()).or_default()).insert(visitor.to_vec()),
            };
        }
    }
    Ok(())
}

/// `INSERT INTO table (keys, counters) VALUES (?, ...) ON CONFLICT (keys) DO UPDATE SET c = c +
/// excluded.c, ...`: adds one rollup row.
fn upsert(table: &str, keys: &[&str], counters: &[&str]) -> String {
    let columns = [keys, counters].concat();
    let add: Vec<String> = counters
        .iter()
        .map(|c| format!("{c} = {c} + excluded.{c}"))
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}",
        columns.join(", "),
        vec!["?"; columns.len()].join(", "),
        keys.join(", "),
        add.join(", ")
    )
}

const AUDIENCES: [&str; 4] = ["humans", "bots", "previews", "scanners"];

/// Binds an audience row's counters from parameter `first` on.
fn audiences(statement: &mut Statement<'_, '_>, first: c_int, a: &Audiences) {
    statement.int(first, a.humans);
    statement.int(first + 1, a.bots);
    statement.int(first + 2, a.previews);
    statement.int(first + 3, a.scanners);
}

/// The six rollup tables, each written under a lock of its own (a batch's rows of one table are
/// thousands of upserts: a few milliseconds of the runtime thread).
#[derive(Clone, Copy)]
pub(super) enum Rollup {
    Buckets,
    Agents,
    Places,
    Sources,
    DomainClicks,
    Arms,
}

impl Rollup {
    pub(super) const ALL: [Rollup; 6] = [
        Rollup::Buckets,
        Rollup::Agents,
        Rollup::Places,
        Rollup::Sources,
        Rollup::DomainClicks,
        Rollup::Arms,
    ];
}

/// Adds one rollup table's rows of `d` (the same rows, values and order as `write::rollups`,
/// which the MariaDB store writes).
pub(super) fn add_rollup(handle: &Handle<'_>, d: &Deltas<'_>, table: Rollup) -> StorageResult<()> {
    match table {
        Rollup::Buckets => {
            let counters = ["humans", "bots", "previews", "scanners", "new_visitors"];
            let mut add = handle.prepare(&upsert(
                "visit_buckets",
                &["code", "span", "bucket"],
                &counters,
            ))?;
            for ((code, span, bucket), c) in &d.buckets {
                add.text(1, code);
                add.int(2, *span);
                add.int(3, *bucket);
                add.int(4, c.humans);
                add.int(5, c.bots);
                add.int(6, c.previews);
                add.int(7, c.scanners);
                add.int(8, c.new_visitors);
                add.execute()?;
            }
        }
        Rollup::Agents => {
            let keys = ["code", "day", "browser", "os", "device", "agent"];
            let mut add = handle.prepare(&upsert("visit_agents", &keys, &AUDIENCES))?;
            for ((code, day, browser, os, device, agent), a) in &d.agents {
                add.text(1, code);
                add.int(2, *day);
                add.text(3, browser);
                add.text(4, os);
                add.text(5, device);
                add.text(6, agent);
                audiences(&mut add, 7, a);
                add.execute()?;
            }
        }
        Rollup::Places => {
            let keys = ["code", "day", "country", "region", "city"];
            let mut add = handle.prepare(&upsert("visit_places", &keys, &AUDIENCES))?;
            for ((code, day, country, region, city), a) in &d.places {
                add.text(1, code);
                add.int(2, *day);
                add.text(3, country);
                add.text(4, region);
                add.text(5, city);
                audiences(&mut add, 6, a);
                add.execute()?;
            }
        }
        Rollup::Sources => {
            let keys = ["code", "day", "referrer_host", "short_domain"];
            let mut add = handle.prepare(&upsert("visit_sources", &keys, &AUDIENCES))?;
            for ((code, day, referrer, domain), a) in &d.sources {
                add.text(1, code);
                add.int(2, *day);
                add.text(3, referrer);
                add.text(4, domain);
                audiences(&mut add, 5, a);
                add.execute()?;
            }
        }
        Rollup::DomainClicks => {
            let keys = ["minute", "short_domain"];
            let mut add = handle.prepare(&upsert("domain_clicks", &keys, &AUDIENCES))?;
            for ((minute, domain), a) in &d.domain_minutes {
                add.int(1, *minute);
                add.text(2, domain);
                audiences(&mut add, 3, a);
                add.execute()?;
            }
        }
        Rollup::Arms => {
            let counters = ["humans", "visitors"];
            let mut add = handle.prepare(&upsert("ab_arms", &["code", "rule"], &counters))?;
            for ((code, rule), a) in &d.arms {
                add.text(1, code);
                add.text(2, rule);
                add.int(3, a.humans);
                add.int(4, a.visitors);
                add.execute()?;
            }
        }
    }
    Ok(())
}

/// Adds to each link's `visit_count` and moves its `last_visit_at` forward: (code, visits, time
/// in the `links` text form).
pub(super) fn add_to_links(
    handle: &Handle<'_>,
    links: &[(&str, i64, String)],
) -> StorageResult<()> {
    let mut update = handle.prepare(
        "UPDATE links SET visit_count = visit_count + ?, \
           last_visit_at = MAX(COALESCE(last_visit_at, ''), ?) \
         WHERE code = ?",
    )?;
    for (code, n, at) in links {
        update.int(1, *n);
        update.text(2, at);
        update.text(3, code);
        update.execute()?;
    }
    Ok(())
}

/// Applies hindsight's `corrections` in order (`crate::corrections`), appending those that
/// changed their visit to `applied`. A statement per visit, as everything here: stepped on the
/// handle they cost no hand-off to sqlx's worker, which was their cost through sqlx.
pub(super) fn correct<'c>(
    handle: &Handle<'_>,
    corrections: &[&'c Correction],
    applied: &mut Vec<Applied<'c>>,
) -> StorageResult<()> {
    let mut update = handle.prepare(
        "UPDATE visits SET audience = ?, device = ?, reasons = ? \
         WHERE event_id = ? AND visited_at = ? AND audience = ?",
    )?;
    let mut forget = handle
        .prepare("DELETE FROM link_visitors WHERE code = ? AND visitor = ? AND first_seen = ?")?;
    for &correction in corrections {
        let (before, after) = (&correction.before, &correction.after);
        update.text(1, after.agent.audience.as_str());
        update.text(2, after.agent.device.as_str());
        update.int(3, i64::from(after.reasons.0));
        update.text(4, &before.event_id);
        update.int(5, before.time_ms);
        update.text(6, before.agent.audience.as_str());
        if !update.execute()? {
            continue;
        }
        let first_visit = leaves_people(correction) && {
            forget.text(1, &before.code);
            forget.blob(2, &before.visitor);
            forget.int(3, before.time_ms);
            forget.execute()?
        };
        applied.push(Applied {
            correction,
            first_visit,
        });
    }
    Ok(())
}
