//! What an audit row is: who, what, where from, and the stored row with its place in the chain.
//! A leaf: the storage traits name these types, and [`super::verify`] walks them through the
//! storage.

use super::changes::Changes;

/// The workspace of an installation without workspaces (the migration's default).
pub const DEFAULT_WORKSPACE: i64 = 1;
/// The chain of what belongs to no workspace: operator keys, workspaces themselves.
pub const INSTALLATION_CHAIN: i64 = 0;

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub kind: ActorKind,
    /// The API key's id (`kind` key), else none.
    pub id: Option<i64>,
    /// The key's name, the console user, `cli`, or the system job.
    pub name: String,
}

impl Actor {
    pub fn key(id: i64, name: impl Into<String>) -> Self {
        Self {
            kind: ActorKind::Key,
            id: Some(id),
            name: name.into(),
        }
    }

    pub fn console(user: impl Into<String>) -> Self {
        Self {
            kind: ActorKind::Console,
            id: None,
            name: user.into(),
        }
    }

    /// The command line, as the operating-system user running it (the database cannot tell).
    pub fn cli() -> Self {
        let user = std::env::var("USER").unwrap_or_default();
        Self {
            kind: ActorKind::Cli,
            id: None,
            name: if user.is_empty() { "cli".into() } else { user },
        }
    }

    pub fn system(job: impl Into<String>) -> Self {
        Self {
            kind: ActorKind::System,
            id: None,
            name: job.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorKind {
    Key,
    Console,
    Cli,
    System,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::Key => "key",
            ActorKind::Console => "console",
            ActorKind::Cli => "cli",
            ActorKind::System => "system",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Key, Self::Console, Self::Cli, Self::System]
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

/// Where a request came from, as the API saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// `X-Request-Id` (nginx's `$request_id`) or one the sidecar made.
    pub request_id: Option<String>,
    pub client_addr: Option<String>,
}

/// Who asks for a change and from where: what every audit row of a request shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub workspace_id: i64,
    pub actor: Actor,
    pub request: RequestInfo,
}

impl Origin {
    /// In the default workspace, without request details (a subcommand, a job).
    pub fn new(actor: Actor) -> Self {
        Self {
            workspace_id: DEFAULT_WORKSPACE,
            actor,
            request: RequestInfo::default(),
        }
    }

    /// The entry recording `action` on `object` by this origin.
    pub fn entry(&self, action: &str, object: impl Into<String>, changes: Changes) -> AuditEntry {
        AuditEntry {
            workspace_id: self.workspace_id,
            actor: self.actor.clone(),
            action: action.to_owned(),
            object: object.into(),
            changes,
            request: self.request.clone(),
            batch_size: None,
            idempotency_key: None,
        }
    }

    /// The entry recording `action` on `object` in `chain`'s log (a workspace's id, or
    /// [`INSTALLATION_CHAIN`]) rather than the origin's own: an operator acts in no workspace,
    /// yet the key it gives a workspace belongs in that workspace's log.
    pub fn entry_in(
        &self,
        chain: i64,
        action: &str,
        object: impl Into<String>,
        changes: Changes,
    ) -> AuditEntry {
        AuditEntry {
            workspace_id: chain,
            ..self.entry(action, object, changes)
        }
    }
}

/// One change to record.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub workspace_id: i64,
    pub actor: Actor,
    /// `link.create`, `key.revoke`, `webhook.update`, `import.run`, `console.*` ...
    pub action: String,
    /// What changed: a code, a key id, a subscription id ('' for none).
    pub object: String,
    pub changes: Changes,
    pub request: RequestInfo,
    /// A batch's size and idempotency key: one row per batch, not per link.
    pub batch_size: Option<i64>,
    pub idempotency_key: Option<String>,
}

impl AuditEntry {
    /// An entry in the default workspace, without request details or batch fields.
    pub fn new(actor: Actor, action: &str, object: impl Into<String>, changes: Changes) -> Self {
        Self {
            workspace_id: DEFAULT_WORKSPACE,
            actor,
            action: action.to_owned(),
            object: object.into(),
            changes,
            request: RequestInfo::default(),
            batch_size: None,
            idempotency_key: None,
        }
    }

    pub fn with_request(mut self, request: RequestInfo) -> Self {
        self.request = request;
        self
    }
}

/// A row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub id: i64,
    pub workspace_id: i64,
    pub seq: i64,
    pub at_ms: i64,
    pub actor_kind: String,
    pub actor_id: Option<i64>,
    pub actor_name: String,
    pub action: String,
    pub object: String,
    /// JSON text, exactly as hashed.
    pub changes: String,
    pub request_id: Option<String>,
    pub client_addr: Option<String>,
    pub batch_size: Option<i64>,
    pub idempotency_key: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

/// A chain's head: its last row and the anchor retention left (seq 0 and [`hash::GENESIS`]: none).
/// Read for every workspace that has a head or rows; a chain with rows but no head reads as
/// `None` heads (no append ever made it: the rows were inserted in SQL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditHead {
    pub workspace_id: i64,
    pub last: Option<(i64, String)>,
    pub anchor: Option<(i64, String)>,
}

/// Which rows a listing returns, newest first: `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// `None`: every workspace (the instance operator).
    pub workspace_id: Option<i64>,
    /// An action, or a family with a trailing `.*` (`webhook.*`).
    pub action: Option<String>,
    /// `key:<id>` for an API key, else an actor name.
    pub actor: Option<String>,
    pub object: Option<String>,
    /// At or after, in Unix milliseconds.
    pub since_ms: Option<i64>,
    /// Before, in Unix milliseconds.
    pub until_ms: Option<i64>,
    /// Rows older than this id (the previous page's last).
    pub before_id: Option<i64>,
    pub limit: u32,
}
