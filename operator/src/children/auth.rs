//! The Secret `<cluster>-node-auth`: the node's logins as a config file it includes at start
//! (`--include`), so no password is ever on a node's command line (which every local user
//! reads in /proc/<pid>/cmdline). tessera-node, redis-server and valkey-server all take
//! `--include <file>`; no shell or entry point is needed.
//!
//! It holds the operator's own user (`crate::users::ADMIN_USER`, SHA-256 only) and makes it the
//! replicas' login to their masters (`masteruser`/`masterauth`), `requirepass` with spec.auth,
//! and `default` as spec.users declares it, so a new pod never starts more open than declared.
//! Every pod mounts it. The pod template names the Secret but not the passwords, so a password
//! change restarts no pod: running nodes are switched live (`crate::auth`, `crate::users`),
//! pods started later read the new file.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::ResourceExt;

use super::{child_meta, cluster_labels, ChildError};
use crate::crd::RedisCluster;
use crate::users;

/// Key (file name) of the config file inside the Secret.
pub const AUTH_CONF_KEY: &str = "auth.conf";
/// Where the Secret is mounted in node pods.
pub const AUTH_DIR: &str = "/etc/tessera-auth";

/// Name of the node auth Secret of cluster `name`.
pub fn node_auth_secret_name(name: &str) -> String {
    format!("{name}-node-auth")
}

/// The logins written into the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLogins<'a> {
    /// The operator's password (its Secret, `crate::auth::admin_secret_name`).
    pub admin_password: &'a str,
    /// spec.auth's password (None without spec.auth).
    pub requirepass: Option<&'a str>,
}

/// Builds the Secret holding the node's logins as node config.
pub fn build(rc: &RedisCluster, logins: NodeLogins<'_>) -> Result<Secret, ChildError> {
    let name = rc.name_any();
    let default_rules = rc
        .spec
        .users
        .iter()
        .find(|u| u.name == users::DEFAULT_USER)
        .map(|u| u.rules.as_str());
    Ok(Secret {
        metadata: child_meta(rc, node_auth_secret_name(&name), cluster_labels(&name))?,
        data: Some(BTreeMap::from([(
            AUTH_CONF_KEY.to_string(),
            ByteString(auth_conf(logins, default_rules).into_bytes()),
        )])),
        type_: Some("Opaque".into()),
        ..Secret::default()
    })
}

/// The config lines (pure): the operator's user and the replication login, `requirepass`,
/// and the declared `default` (rules, with spec.auth's password). Passwords are quoted as
/// redis' config parser reads them (double quotes; `\\`, `\"` and `\xHH` escapes), so any
/// password survives. `default`'s line comes last and carries its password: a `user default`
/// line replaces what `requirepass` set.
pub fn auth_conf(logins: NodeLogins<'_>, default_rules: Option<&str>) -> String {
    let mut out = String::new();
    let admin = users::setuser_args(users::ADMIN_RULES, &[users::sha256(logins.admin_password)]);
    out.push_str(&user_line(users::ADMIN_USER, &admin));
    out.push_str(&format!("masteruser {}\n", users::ADMIN_USER));
    out.push_str(&format!("masterauth {}\n", quote(logins.admin_password)));
    if let Some(pw) = logins.requirepass {
        out.push_str(&format!("requirepass {}\n", quote(pw)));
    }
    if let Some(rules) = default_rules {
        let pw = match logins.requirepass {
            Some(p) => format!("#{}", users::sha256(p)),
            None => "nopass".to_string(),
        };
        let args: Vec<String> = ["reset", "on"]
            .into_iter()
            .map(str::to_string)
            .chain(rules.split_whitespace().map(str::to_string))
            .chain([pw])
            .collect();
        out.push_str(&user_line(users::DEFAULT_USER, &args));
    }
    out
}

/// `user <name> <rules>`, a rule quoted when the config parser would split or unescape it.
fn user_line(name: &str, args: &[String]) -> String {
    let mut line = format!("user {name}");
    for a in args {
        line.push(' ');
        if a.chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '\\'))
        {
            line.push_str(a);
        } else {
            line.push_str(&quote(a));
        }
    }
    line.push('\n');
    line
}

/// A config-file argument in double quotes, escaped as redis' config parser reads it.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_carries_the_operators_user_and_the_replication_login() {
        let sha = users::sha256("adm");
        let plain = auth_conf(
            NodeLogins {
                admin_password: "adm",
                requirepass: None,
            },
            None,
        );
        assert_eq!(
            plain,
            format!(
                "user tessera-operator reset on ~* &* +@all #{sha}\n\
                 masteruser tessera-operator\nmasterauth \"adm\"\n"
            )
        );
        let full = auth_conf(
            NodeLogins {
                admin_password: "adm",
                requirepass: Some("p\"w"),
            },
            Some("off ~cache:*"),
        );
        let lines: Vec<&str> = full.lines().collect();
        assert_eq!(lines[3], "requirepass \"p\\\"w\"");
        assert_eq!(
            lines[4],
            format!(
                "user default reset on off ~cache:* #{}",
                users::sha256("p\"w")
            )
        );
        let open = auth_conf(
            NodeLogins {
                admin_password: "adm",
                requirepass: None,
            },
            Some("~x \"y"),
        );
        assert!(
            open.ends_with("user default reset on ~x \"\\\"y\" nopass\n"),
            "{open}"
        );
    }
}
