//! The Secret `<cluster>-node-auth`: `requirepass`/`masterauth` as a config file the node
//! includes at start (`--include`), so the password never is on a node's command line (which
//! every local user reads in /proc/<pid>/cmdline). tessera-node, redis-server and valkey-server
//! all take `--include <file>`; no shell or entry point is needed.
//!
//! Built from `spec.auth`'s Secret (the desired password), applied before the StatefulSets.
//! The pod template names the Secret but not the password, so a password change restarts no
//! pod: running nodes are switched live (`crate::auth`), pods started later read the new file.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::ResourceExt;

use super::{child_meta, cluster_labels, ChildError};
use crate::crd::RedisCluster;

/// Key (file name) of the config file inside the Secret.
pub const AUTH_CONF_KEY: &str = "auth.conf";
/// Where the Secret is mounted in node pods.
pub const AUTH_DIR: &str = "/etc/tessera-auth";

/// Name of the node auth Secret of cluster `name`.
pub fn node_auth_secret_name(name: &str) -> String {
    format!("{name}-node-auth")
}

/// Builds the Secret holding `password` as node config.
pub fn build(rc: &RedisCluster, password: &str) -> Result<Secret, ChildError> {
    let name = rc.name_any();
    Ok(Secret {
        metadata: child_meta(rc, node_auth_secret_name(&name), cluster_labels(&name))?,
        data: Some(BTreeMap::from([(
            AUTH_CONF_KEY.to_string(),
            ByteString(auth_conf(password).into_bytes()),
        )])),
        type_: Some("Opaque".into()),
        ..Secret::default()
    })
}

/// The config lines: both directives with the password quoted as redis' config parser reads
/// it (double quotes; `\\`, `\"` and `\xHH` escapes), so any password survives.
pub fn auth_conf(password: &str) -> String {
    let quoted = quote(password);
    format!("requirepass {quoted}\nmasterauth {quoted}\n")
}

fn quote(s: &str) -> String {
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
