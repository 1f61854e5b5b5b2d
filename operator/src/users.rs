//! `spec.users`: ACL users kept on every node.
//!
//! Redis Cluster does not replicate ACLs, so each node (master or replica) gets every user by
//! `ACL SETUSER <name> reset on <rules> #<sha256>...`: `reset` first, so a node matches the
//! spec exactly whatever it held before. Each reconcile reads every node's `ACL LIST` and
//! sends only what differs ([`plan_node`], pure), so a restarted or new pod gets its users
//! back at the next reconcile (pod changes trigger one). Users the operator created are kept
//! in `status.users` (its record): a user that leaves the spec is deleted with ACL DELUSER,
//! users made by hand are never touched.
//!
//! Rules are checked up front by the node's own ACL grammar and command catalog
//! (`tessera_node::acl`), so a typo is a status condition naming the user and the rule, and
//! nothing is sent to the nodes.
//!
//! A changed password Secret is a rotation with an overlap window ([`target`]): every node
//! first gets both passwords (the user's SETUSER carries both hashes), then, once every node
//! has them, the old one keeps working for `spec.userPasswordOverlapSeconds` while clients
//! move, then it is removed from every node. Only hashes are sent and recorded: the record
//! keeps the old password's SHA-256, never the password.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use tessera_node::acl::{hash_password, Catalog, Env, User};
use tracing::{info, instrument, warn};

use crate::crd::{RedisClusterSpec, UserStatus};
use tessera_topology::conn::connect;
use tessera_topology::{EngineOptions, PodEndpoint, TopologyError};

/// The operator's own ACL user on every node: its login (so `default` may be turned off) and
/// the replicas' `masteruser`. Reserved: spec.users may not declare it.
pub const ADMIN_USER: &str = "tessera-operator";
/// The operator's user may do everything (topology, MIGRATE, replication, ACL).
pub const ADMIN_RULES: &str = "~* &* +@all";
/// Redis's built-in user; declarable with rules only (its password is spec.auth's).
pub const DEFAULT_USER: &str = "default";
/// Redis's own rules for `default`, restored when it leaves spec.users.
const DEFAULT_RULES: &str = "~* &* +@all";

/// Condition type: every node holds the users of the spec.
pub const COND_READY: &str = "UsersReady";
/// Condition type: a password rotation is under way (both passwords accepted).
pub const COND_ROTATING: &str = "UsersRotating";

/// The command catalog of tessera-node (Redis 7.0's commands and categories).
fn catalog() -> &'static Catalog {
    tessera_node::standalone_acl_catalog()
}

fn env() -> Env<'static> {
    Env {
        catalog: catalog(),
        pubsub_allchannels: false,
    }
}

/// A problem with one entry of spec.users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserProblem {
    pub user: String,
    pub message: String,
}

/// Rules the operator sets itself (passwords come from the Secret, `reset on` comes first).
fn operator_rule(tok: &str) -> bool {
    tok.starts_with(['>', '<', '#', '!'])
        || ["nopass", "resetpass", "reset"]
            .iter()
            .any(|r| tok.eq_ignore_ascii_case(r))
}

/// Checks spec.users (pure): names unique, not the operator's, no spaces; a passwordSecret
/// for every user but `default` (whose password is spec.auth's) and none for it; rules parsed
/// by the node's ACL grammar with its command catalog; no password rules (they come from the
/// Secret).
pub fn validate(spec: &RedisClusterSpec) -> Vec<UserProblem> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, u) in spec.users.iter().enumerate() {
        let mut bad = |message: String| {
            out.push(UserProblem {
                user: u.name.clone(),
                message: format!("spec.users[{i}] ({:?}): {message}", u.name),
            })
        };
        if u.name.is_empty() || u.name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            bad("the name must be non-empty, without spaces".into());
        }
        if u.name == ADMIN_USER {
            bad(format!(
                "{ADMIN_USER:?} is reserved: it is the operator's own user"
            ));
        }
        if !seen.insert(u.name.as_str()) {
            bad("declared twice".into());
        }
        match &u.password_secret {
            Some(_) if u.name == DEFAULT_USER => bad(
                "`default` takes rules only: its password is spec.auth's (none without it)".into(),
            ),
            Some(r) if r.name.is_empty() || r.key.is_empty() => {
                bad("passwordSecret needs name and key".into())
            }
            None if u.name != DEFAULT_USER => bad("passwordSecret is required".into()),
            _ => {}
        }
        if let Some(tok) = u.rules.split_whitespace().find(|t| operator_rule(t)) {
            bad(format!(
                "rule {tok:?}: passwords come from passwordSecret and the operator applies `reset` itself"
            ));
            continue;
        }
        if let Err(e) = canonical(&u.name, &u.rules, &[]) {
            bad(e);
        }
    }
    out
}

/// The ACL SETUSER arguments after the name: `reset on <rules> #<hash>...`.
pub fn setuser_args(rules: &str, hashes: &[String]) -> Vec<String> {
    user_args(rules, hashes.iter().map(|h| format!("#{h}")))
}

/// `reset on <rules> <password rules>` (password rules: `#<hash>` or `nopass`).
fn user_args(rules: &str, passwords: impl IntoIterator<Item = String>) -> Vec<String> {
    ["reset", "on"]
        .into_iter()
        .map(str::to_string)
        .chain(rules.split_whitespace().map(str::to_string))
        .chain(passwords)
        .collect()
}

/// The line ACL LIST shows for the user once set (Redis 7.0's canonical form, as tessera-node
/// and redis-server 7.0 print it), or the node's error text for a bad rule.
pub fn canonical(name: &str, rules: &str, hashes: &[String]) -> Result<String, String> {
    canonical_args(name, &setuser_args(rules, hashes))
}

fn canonical_args(name: &str, args: &[String]) -> Result<String, String> {
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut u = User::new(env());
    u.apply_all(env(), &refs).map_err(|e| e.to_string())?;
    Ok(format!(
        "user {name} {}",
        String::from_utf8_lossy(&u.describe(catalog()))
    ))
}

/// SHA-256 (hex) of a password, as the nodes keep it.
pub fn sha256(password: &str) -> String {
    hash_password(password.as_bytes())
}

/// One user as every node should hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredUser {
    pub name: String,
    /// `reset on <rules> #<hash>...`.
    pub args: Vec<String>,
    /// What ACL LIST shows when the node holds it.
    pub line: String,
}

/// One command for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeOp {
    Set { name: String, args: Vec<String> },
    Del(String),
}

/// The user name of an ACL LIST line (`user <name> ...`).
fn line_name(line: &str) -> Option<&str> {
    line.strip_prefix("user ")?.split(' ').next()
}

/// Whether two ACL LIST lines describe the same user (pure). Servers print the same rules
/// differently: redis-server 7.0 lists single commands in its table's hash order,
/// tessera-node in its own, valkey keeps the rules as written (`+@write -@dangerous`). So
/// both lines are read back as rules by the node's grammar and the users compared; a line
/// the grammar cannot read (a command tessera-node does not know) falls back to comparing
/// the words in any order.
pub fn same_rules(a: &str, b: &str) -> bool {
    match (as_user(a), as_user(b)) {
        (Some(x), Some(y)) => x == y,
        _ => normalized(a) == normalized(b),
    }
}

/// The user an ACL LIST line describes (`reset` first, as the operator sets users).
fn as_user(line: &str) -> Option<(String, User)> {
    let mut words = line
        .strip_prefix("user ")?
        .split(' ')
        .filter(|w| !w.is_empty());
    let name = words.next()?.to_string();
    let args: Vec<&[u8]> = std::iter::once("reset")
        .chain(words)
        .map(str::as_bytes)
        .collect();
    let mut u = User::new(env());
    u.apply_all(env(), &args).ok()?;
    Some((name, u))
}

fn normalized(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut sel: Option<Vec<&str>> = None;
    for tok in line.split(' ').filter(|t| !t.is_empty()) {
        match sel.as_mut() {
            Some(inner) => {
                inner.push(tok);
                if tok.ends_with(')') {
                    let mut inner = sel.take().unwrap_or_default();
                    inner.sort_unstable();
                    out.push(format!("({})", inner.join(" ")));
                }
            }
            None if tok.starts_with('(') && !tok.ends_with(')') => sel = Some(vec![tok]),
            None => out.push(tok.to_string()),
        }
    }
    if let Some(inner) = sel {
        out.push(inner.join(" "));
    }
    out.sort_unstable();
    out
}

/// What one node needs (pure): a SETUSER for each desired user whose ACL LIST line differs
/// (missing, other rules, other passwords, changed by hand; see [`same_rules`]), a DELUSER
/// for each user to remove that the node still has. A server whose canonical form differs
/// from Redis 7.0's gets the (idempotent) SETUSER again on each reconcile.
pub fn plan_node(desired: &[DesiredUser], remove: &[String], acl_list: &[String]) -> Vec<NodeOp> {
    let have: BTreeMap<&str, &str> = acl_list
        .iter()
        .filter_map(|l| Some((line_name(l)?, l.as_str())))
        .collect();
    let mut ops = Vec::new();
    for d in desired {
        if !have
            .get(d.name.as_str())
            .is_some_and(|l| same_rules(l, &d.line))
        {
            ops.push(NodeOp::Set {
                name: d.name.clone(),
                args: d.args.clone(),
            });
        }
    }
    for r in remove {
        if have.contains_key(r.as_str()) {
            ops.push(NodeOp::Del(r.clone()));
        }
    }
    ops
}

/// The record of one user for this reconcile, from its last record and the current password
/// hash (pure). The rotation: a new hash keeps the old one as `previous`; once every node has
/// both, `overlap_since` is set (by [`record_after`]); `overlap` later the old one goes.
pub fn target(
    rec: Option<&UserStatus>,
    name: &str,
    sha: &str,
    now: Timestamp,
    overlap: Duration,
) -> UserStatus {
    let fresh = UserStatus {
        name: name.to_string(),
        password_sha256: sha.to_string(),
        ..UserStatus::default()
    };
    let Some(rec) = rec.filter(|r| !r.removing && !r.password_sha256.is_empty()) else {
        return fresh;
    };
    if rec.password_sha256 != sha {
        // Changed again mid-rotation: the oldest password goes at once.
        return UserStatus {
            previous_password_sha256: Some(rec.password_sha256.clone()),
            ..fresh
        };
    }
    if rec.previous_password_sha256.is_none() {
        return fresh;
    }
    let over = rec
        .overlap_since
        .as_deref()
        .and_then(|s| s.parse::<Timestamp>().ok())
        .is_some_and(|t| overlap_ended(t, now, overlap));
    if over {
        fresh
    } else {
        rec.clone()
    }
}

fn overlap_ended(since: Timestamp, now: Timestamp, overlap: Duration) -> bool {
    let elapsed = now.duration_since(since);
    elapsed.as_secs_f64() >= overlap.as_secs_f64()
}

/// The password hashes a node holds for this record: the current, and the old during a
/// rotation.
pub fn hashes(rec: &UserStatus) -> Vec<String> {
    std::iter::once(rec.password_sha256.clone())
        .chain(rec.previous_password_sha256.clone())
        .collect()
}

/// What this reconcile does about users (pure, see [`plan`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsersPlan {
    pub desired: Vec<DesiredUser>,
    /// Users of the record no longer in the spec.
    pub remove: Vec<String>,
    /// The record to write once the nodes were visited ([`record_after`]).
    pub record: Vec<UserStatus>,
    /// Users whose Secret could not be read: (user, why). Their record and nodes are left.
    pub unavailable: Vec<(String, String)>,
}

/// Plans the users step (pure) from the spec, each user's password (read from its Secret,
/// or why not), the operator's record, the time and the overlap window. The spec's rules
/// must have passed [`validate`].
pub fn plan(
    spec: &RedisClusterSpec,
    passwords: &BTreeMap<String, Result<String, String>>,
    record: &[UserStatus],
    now: Timestamp,
) -> UsersPlan {
    let overlap = Duration::from_secs(u64::from(spec.user_password_overlap_seconds));
    let mut p = UsersPlan::default();
    for u in spec.users.iter().filter(|u| u.name != DEFAULT_USER) {
        let rec = record.iter().find(|r| r.name == u.name);
        let pw = passwords
            .get(&u.name)
            .cloned()
            .unwrap_or_else(|| Err("not read".into()));
        let pw = match pw {
            Ok(pw) => pw,
            Err(why) => {
                p.unavailable.push((u.name.clone(), why));
                p.record.extend(rec.cloned());
                continue;
            }
        };
        let t = target(rec, &u.name, &sha256(&pw), now, overlap);
        let hs = hashes(&t);
        match canonical(&u.name, &u.rules, &hs) {
            Ok(line) => p.desired.push(DesiredUser {
                name: u.name.clone(),
                args: setuser_args(&u.rules, &hs),
                line,
            }),
            // validate() refuses such a spec; keep the record and leave the nodes.
            Err(why) => {
                p.unavailable.push((u.name.clone(), why));
                p.record.extend(rec.cloned());
                continue;
            }
        }
        p.record.push(t);
    }
    for r in record.iter().filter(|r| r.name != DEFAULT_USER) {
        if !spec.users.iter().any(|u| u.name == r.name) {
            p.remove.push(r.name.clone());
            p.record.push(UserStatus {
                name: r.name.clone(),
                removing: true,
                ..UserStatus::default()
            });
        }
    }
    p
}

/// What the operator's user and `default` need (see [`with_access`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// SHA-256 of the operator's password.
    pub admin_sha: String,
    /// The default user's password as every node runs it (spec.auth's; None: `nopass`), or
    /// None while a password change has not reached every node: `default` is then left
    /// alone, so this step and the live password switch (`crate::auth`) never undo each other.
    pub default_password: Option<Option<String>>,
}

/// The operator's user as every node holds it (pure).
pub fn admin_user(admin_sha: &str) -> Result<DesiredUser, String> {
    let args = setuser_args(ADMIN_RULES, &[admin_sha.to_string()]);
    Ok(DesiredUser {
        name: ADMIN_USER.to_string(),
        line: canonical_args(ADMIN_USER, &args)?,
        args,
    })
}

/// `default` with `rules` and the password the nodes run (`#<sha>`, or `nopass`). Pure.
pub fn default_user(rules: &str, password: Option<&str>) -> Result<DesiredUser, String> {
    let pw = match password {
        Some(p) => format!("#{}", sha256(p)),
        None => "nopass".to_string(),
    };
    let args = user_args(rules, [pw]);
    Ok(DesiredUser {
        name: DEFAULT_USER.to_string(),
        line: canonical_args(DEFAULT_USER, &args)?,
        args,
    })
}

/// [`plan`] plus the operator's user (first: every node gets it before anything else) and
/// `default` (pure): declared, it gets its rules with spec.auth's password; no longer
/// declared, Redis's own rules come back once and it leaves the record. `default` is never
/// deleted (Redis refuses), and is left alone while a password change is under way.
pub fn with_access(
    mut p: UsersPlan,
    spec: &RedisClusterSpec,
    record: &[UserStatus],
    access: &Access,
) -> UsersPlan {
    match admin_user(&access.admin_sha) {
        Ok(a) => p.desired.insert(0, a),
        Err(why) => p.unavailable.push((ADMIN_USER.to_string(), why)),
    }
    let declared = spec.users.iter().find(|u| u.name == DEFAULT_USER);
    let rec = record.iter().find(|r| r.name == DEFAULT_USER);
    let (rules, removing) = match (declared, rec) {
        (Some(u), _) => (u.rules.as_str(), false),
        (None, Some(_)) => (DEFAULT_RULES, true),
        (None, None) => return p,
    };
    let Some(pw) = &access.default_password else {
        p.record.extend(rec.cloned());
        return p;
    };
    match default_user(rules, pw.as_deref()) {
        Ok(d) => {
            p.desired.push(d);
            p.record.push(UserStatus {
                name: DEFAULT_USER.to_string(),
                password_sha256: pw.as_deref().map(sha256).unwrap_or_default(),
                removing,
                ..UserStatus::default()
            });
        }
        Err(why) => {
            p.unavailable.push((DEFAULT_USER.to_string(), why));
            p.record.extend(rec.cloned());
        }
    }
    p
}

/// The record once the nodes were visited (pure): when every node took the plan, rotations
/// start their overlap window now and removed users leave the record; otherwise the planned
/// record stands and the next reconcile tries again.
pub fn record_after(plan: &UsersPlan, all_nodes_ok: bool, now: Timestamp) -> Vec<UserStatus> {
    let mut out = Vec::with_capacity(plan.record.len());
    for r in &plan.record {
        let applied = plan.desired.iter().any(|d| d.name == r.name);
        if !all_nodes_ok {
            out.push(r.clone());
        } else if r.removing {
            continue;
        } else if applied && r.previous_password_sha256.is_some() && r.overlap_since.is_none() {
            out.push(UserStatus {
                overlap_since: Some(now.to_string()),
                ..r.clone()
            });
        } else {
            out.push(r.clone());
        }
    }
    out
}

/// When the next reconcile should come to end an overlap window (pure).
pub fn next_check(record: &[UserStatus], now: Timestamp, overlap: Duration) -> Option<Duration> {
    record
        .iter()
        .filter(|r| r.previous_password_sha256.is_some())
        .map(|r| {
            let since = r
                .overlap_since
                .as_deref()
                .and_then(|s| s.parse::<Timestamp>().ok());
            match since {
                // Not on every node yet: soon.
                None => Duration::from_secs(5),
                Some(t) => {
                    let elapsed = now.duration_since(t).as_secs_f64().max(0.0);
                    let left = (overlap.as_secs_f64() - elapsed).max(0.0);
                    Duration::from_secs_f64(left) + Duration::from_secs(1)
                }
            }
        })
        .min()
}

/// The users conditions (type, on, reason, message), pure: UsersReady and UsersRotating.
pub fn conditions(
    problems: &[UserProblem],
    plan: Option<&UsersPlan>,
    nodes: Option<&NodesOutcome>,
    record: &[UserStatus],
) -> Vec<(&'static str, bool, String, String)> {
    let rotating: Vec<String> = record
        .iter()
        .filter(|r| r.previous_password_sha256.is_some())
        .map(|r| {
            let step = if r.overlap_since.is_some() {
                "both passwords on every node, the old one goes after the overlap window"
            } else {
                "adding the new password on every node"
            };
            format!("{}: {step}", r.name)
        })
        .collect();
    let rot = (
        COND_ROTATING,
        !rotating.is_empty(),
        if rotating.is_empty() {
            "NoRotation".to_string()
        } else {
            "PasswordOverlap".to_string()
        },
        rotating.join("; "),
    );
    let ready = if !problems.is_empty() {
        (
            COND_READY,
            false,
            "InvalidUserRules".to_string(),
            problems
                .iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
        )
    } else if let Some((u, why)) = plan.and_then(|p| p.unavailable.first()) {
        (
            COND_READY,
            false,
            "SecretUnavailable".to_string(),
            format!("user {u:?}: {why}"),
        )
    } else {
        match nodes {
            Some(n) if !n.failed.is_empty() => (
                COND_READY,
                false,
                "NodesPending".to_string(),
                format!(
                    "{} of {} nodes not updated: {}",
                    n.failed.len(),
                    n.visited,
                    n.failed.join("; ")
                ),
            ),
            Some(n) => (
                COND_READY,
                true,
                "Applied".to_string(),
                format!(
                    "{} users on {} nodes ({} commands sent)",
                    plan.map_or(0, |p| p.desired.len()),
                    n.visited,
                    n.commands
                ),
            ),
            None => (
                COND_READY,
                false,
                "NodesPending".to_string(),
                "no node reached yet".to_string(),
            ),
        }
    };
    vec![ready, rot]
}

/// [`conditions`] as Kubernetes conditions, keeping lastTransitionTime while a condition's
/// status stays (pure).
pub fn to_conditions(
    wanted: Vec<(&'static str, bool, String, String)>,
    previous: &[Condition],
    now: Timestamp,
    generation: Option<i64>,
) -> Vec<Condition> {
    wanted
        .into_iter()
        .map(|(type_, on, reason, message)| {
            let status = if on { "True" } else { "False" };
            let since = match previous.iter().find(|c| c.type_ == type_) {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => Time(now),
            };
            Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason,
                message,
                last_transition_time: since,
                observed_generation: generation,
            }
        })
        .collect()
}

/// What visiting the nodes did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodesOutcome {
    pub visited: usize,
    /// Commands sent (SETUSER and DELUSER).
    pub commands: usize,
    /// `<pod>: <error>` of each node not brought to the plan.
    pub failed: Vec<String>,
}

/// Brings every node in `pods` to the plan: ACL LIST, then the SETUSER/DELUSER that differ.
/// Then, once every node holds the operator's user, points each node's replication login at
/// it (`masteruser`/`masterauth`, by CONFIG SET where CONFIG GET differs): a replica then
/// authenticates as the operator's user, whatever `default` is. A node that fails is reported
/// and the others still visited.
#[instrument(skip_all, fields(nodes = pods.len()))]
pub async fn apply(pods: &[PodEndpoint], opts: &EngineOptions, plan: &UsersPlan) -> NodesOutcome {
    let mut out = NodesOutcome {
        visited: pods.len(),
        ..NodesOutcome::default()
    };
    for p in pods {
        match apply_one(p, opts, plan).await {
            Ok(n) => {
                if n > 0 {
                    info!(pod = %p.pod, commands = n, "ACL users updated");
                }
                out.commands += n;
            }
            Err(e) => {
                warn!(pod = %p.pod, error = %e, "ACL users not updated");
                out.failed.push(format!("{}: {e}", p.pod));
            }
        }
    }
    let admin_applied = plan.desired.iter().any(|d| d.name == ADMIN_USER);
    if let (Some(a), true, true) = (&opts.admin, admin_applied, out.failed.is_empty()) {
        for p in pods {
            match replication_login(p, opts, &a.user, &a.password).await {
                Ok(true) => {
                    info!(pod = %p.pod, "replication login set to the operator's user");
                    out.commands += 1;
                }
                Ok(false) => {}
                Err(e) => {
                    warn!(pod = %p.pod, error = %e, "replication login not set");
                    out.failed.push(format!("{}: {e}", p.pod));
                }
            }
        }
    }
    out
}

/// Whether a node's `masteruser`/`masterauth` (CONFIG GET values) must change to the
/// operator's login (pure).
pub fn replication_login_differs(
    masteruser: &str,
    masterauth: &str,
    user: &str,
    password: &str,
) -> bool {
    masteruser != user || masterauth != password
}

/// Sets `masteruser`/`masterauth` on one node when they differ; true when set.
async fn replication_login(
    p: &PodEndpoint,
    opts: &EngineOptions,
    user: &str,
    password: &str,
) -> Result<bool, TopologyError> {
    let timeout = opts.command_timeout.max(Duration::from_secs(1));
    let mut conn = connect(&p.host, p.port, opts, timeout).await?;
    let get = |name: &'static str| {
        let mut c = redis::cmd("CONFIG");
        c.arg("GET").arg(name);
        c
    };
    let mu: Vec<String> = conn.run(&get("masteruser")).await?;
    let ma: Vec<String> = conn.run(&get("masterauth")).await?;
    let value = |v: &[String]| v.get(1).cloned().unwrap_or_default();
    if !replication_login_differs(&value(&mu), &value(&ma), user, password) {
        return Ok(false);
    }
    // One CONFIG SET: both change together.
    let _: redis::Value = conn
        .run(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("masteruser")
                .arg(user)
                .arg("masterauth")
                .arg(password),
        )
        .await?;
    Ok(true)
}

async fn apply_one(
    p: &PodEndpoint,
    opts: &EngineOptions,
    plan: &UsersPlan,
) -> Result<usize, TopologyError> {
    let timeout = opts.command_timeout.max(Duration::from_secs(1));
    let mut conn = connect(&p.host, p.port, opts, timeout).await?;
    let list: Vec<String> = conn.run(redis::cmd("ACL").arg("LIST")).await?;
    let ops = plan_node(&plan.desired, &plan.remove, &list);
    for op in &ops {
        let mut cmd = redis::cmd("ACL");
        match op {
            NodeOp::Set { name, args } => {
                cmd.arg("SETUSER").arg(name).arg(args);
            }
            NodeOp::Del(name) => {
                cmd.arg("DELUSER").arg(name);
            }
        }
        let _: redis::Value = conn.run(&cmd).await?;
    }
    Ok(ops.len())
}

#[cfg(test)]
mod tests;
