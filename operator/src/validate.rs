//! Checks the schema cannot express (or that an API server without CEL would skip).
//!
//! Pure: a spec in, a list of human-readable problems out. The controller turns a non-empty
//! list into phase Failed, a `Degraded` condition with reason `InvalidSpec` and a Warning Event,
//! and applies no children until the spec is fixed.

use crate::crd::{RedisClusterSpec, TlsSpec, OPERATOR_OWNED_DIRECTIVES};

/// Longest object name we accept: `<name>-<shard>` must fit a StatefulSet name whose pods get a
/// `controller-revision-hash` label (63 chars) — Kubernetes' documented limit for that is 52.
const MAX_NAME_LEN: usize = 40;

/// Every problem found in `spec` for a resource called `name`; empty means valid.
pub fn validate(name: &str, spec: &RedisClusterSpec) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > MAX_NAME_LEN {
        problems.push(format!(
            "metadata.name {name:?} is {} characters; at most {MAX_NAME_LEN} fit the StatefulSet and pod names derived from it",
            name.len()
        ));
    }
    if !(1..=1000).contains(&spec.shards) {
        problems.push(format!("spec.shards must be 1..=1000, got {}", spec.shards));
    }
    if spec.replicas_per_shard > 5 {
        problems.push(format!(
            "spec.replicasPerShard must be 0..=5, got {}",
            spec.replicas_per_shard
        ));
    }
    if !(100..=600_000).contains(&spec.node_timeout_ms) {
        problems.push(format!(
            "spec.nodeTimeoutMs must be 100..=600000, got {}",
            spec.node_timeout_ms
        ));
    }
    if let Some(image) = &spec.image {
        if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
            problems.push(format!("spec.image {image:?} is not an image reference"));
        }
    }
    for (key, value) in &spec.config {
        problems.extend(check_directive(key, value));
    }
    if let Some(storage) = &spec.storage {
        if let Err(e) = parse_quantity_bytes(&storage.size) {
            problems.push(format!("spec.storage.size {:?}: {e}", storage.size));
        }
    }
    if let Some(auth) = &spec.auth {
        if auth.secret_name.is_empty() || auth.key.is_empty() {
            problems.push("spec.auth needs secretName and key".to_string());
        }
    }
    if let Some(tls) = &spec.tls {
        problems.extend(check_tls(tls));
    }
    if let Some(sc) = spec.pod.as_ref().and_then(|p| p.security_context.as_ref()) {
        if sc.run_as_user == Some(0) || sc.run_as_non_root == Some(false) {
            problems.push(
                "spec.pod.securityContext asks for root; node pods never run as root".to_string(),
            );
        }
    }
    problems
}

/// Problems with spec.tls (the CEL rule says the same where the API server runs CEL).
fn check_tls(tls: &TlsSpec) -> Vec<String> {
    let mut problems = Vec::new();
    match (&tls.secret_name, &tls.issuer_ref) {
        (Some(_), Some(_)) | (None, None) => {
            problems.push("spec.tls needs exactly one of secretName and issuerRef".to_string())
        }
        (Some(name), None) if !is_dns_subdomain(name) => {
            problems.push(format!("spec.tls.secretName {name:?} is not a Secret name"))
        }
        (None, Some(issuer)) => {
            if !is_dns_subdomain(&issuer.name) {
                problems.push(format!(
                    "spec.tls.issuerRef.name {:?} is not an issuer name",
                    issuer.name
                ));
            }
            if issuer.group == "cert-manager.io"
                && !matches!(issuer.kind.as_str(), "Issuer" | "ClusterIssuer")
            {
                problems.push(format!(
                    "spec.tls.issuerRef.kind {:?}: cert-manager.io issuers are Issuer or ClusterIssuer",
                    issuer.kind
                ));
            }
        }
        _ => {}
    }
    problems
}

/// A Kubernetes object name (DNS-1123 subdomain).
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Problems with one `config` entry.
fn check_directive(key: &str, value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let lower = key.to_ascii_lowercase();
    if OPERATOR_OWNED_DIRECTIVES.contains(&lower.as_str()) {
        let hint = match lower.as_str() {
            "requirepass" | "masterauth" | "masteruser" => " (use spec.auth)",
            "cluster-node-timeout" => " (use spec.nodeTimeoutMs)",
            _ => "",
        };
        problems.push(format!(
            "spec.config.{key}: the operator owns this directive{hint}"
        ));
    }
    let name_ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && key.starts_with(|c: char| c.is_ascii_lowercase());
    if !name_ok {
        problems.push(format!(
            "spec.config: {key:?} is not a directive name (lowercase letters, digits and '-')"
        ));
    }
    if value.contains(['\n', '\r', '\0']) {
        problems.push(format!(
            "spec.config.{key}: the value must be a single line"
        ));
    }
    if value.trim().is_empty() && !matches!(lower.as_str(), "save") {
        problems.push(format!("spec.config.{key}: empty value"));
    }
    if let Some(why) = unsupported(&lower) {
        problems.push(format!("spec.config.{key}: {why}"));
    }
    problems.extend(check_known_value(&lower, value));
    problems
}

/// TLS ports, files and modes come from spec.tls: the operator mounts the certificate, points
/// the nodes at it, reloads it and uses it for its own connections. Set here, they would start
/// nodes that cannot load their files or that the operator cannot reach. (Protocols, ciphers
/// and session caching stay settable here.)
const TLS_FROM_SPEC: &str =
    "TLS is configured by spec.tls (a Secret or a cert-manager issuer), not spec.config";

/// Directives tessera-node refuses at start (the pod would crash-loop) or that would take
/// away the commands the operator drives.
fn unsupported(key: &str) -> Option<&'static str> {
    match key {
        "rename-command" => {
            Some("renaming commands is not supported here (the operator drives CLUSTER, CONFIG, INFO...)")
        }
        "user" | "aclfile" => Some("ACL users are declared in spec.users (the operator keeps them on every node)"),
        "loadmodule" => Some("Redis modules are not supported by tessera-node"),
        "tls-port"
        | "tls-cert-file"
        | "tls-key-file"
        | "tls-key-file-pass"
        | "tls-client-cert-file"
        | "tls-client-key-file"
        | "tls-client-key-file-pass"
        | "tls-ca-cert-file"
        | "tls-ca-cert-dir"
        | "tls-dh-params-file"
        | "tls-replication"
        | "tls-cluster"
        | "tls-auth-clients" => Some(TLS_FROM_SPEC),
        _ => None,
    }
}

/// Value checks for a few directives whose mistakes are common and fatal at node start.
fn check_known_value(key: &str, value: &str) -> Option<String> {
    let v = value.trim();
    let yes_no = |v: &str| matches!(v, "yes" | "no");
    match key {
        "appendonly"
        | "cluster-require-full-coverage"
        | "cluster-allow-reads-when-down"
        | "cluster-replica-no-failover"
        | "lazyfree-lazy-eviction"
        | "activedefrag" => {
            (!yes_no(v)).then(|| format!("spec.config.{key}: expected yes or no, got {v:?}"))
        }
        "appendfsync" => (!matches!(v, "always" | "everysec" | "no"))
            .then(|| format!("spec.config.{key}: expected always, everysec or no, got {v:?}")),
        "maxmemory-policy" => (!matches!(
            v,
            "noeviction"
                | "allkeys-lru"
                | "allkeys-lfu"
                | "allkeys-random"
                | "volatile-lru"
                | "volatile-lfu"
                | "volatile-random"
                | "volatile-ttl"
        ))
        .then(|| format!("spec.config.{key}: unknown policy {v:?}")),
        "maxmemory" => parse_memory(v)
            .err()
            .map(|e| format!("spec.config.{key}: {e}")),
        "databases" | "maxclients" | "timeout" | "tcp-keepalive" | "hz" => v
            .parse::<u64>()
            .is_err()
            .then(|| format!("spec.config.{key}: expected a non-negative integer, got {v:?}")),
        _ => None,
    }
}

/// redis.conf memory units: plain bytes, k/kb/m/mb/g/gb (case-insensitive).
fn parse_memory(v: &str) -> Result<u64, String> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{v:?} is not a memory size"))?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return Err(format!("{v:?} has an unknown unit {unit:?}")),
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("{v:?} is too large"))
}

/// Parses a Kubernetes quantity used as a volume size into bytes (must be > 0).
///
/// Hand-rolled because k8s-openapi's `Quantity` is an opaque string and no well-kept crate
/// parses it; volume sizes only need integers or decimals with binary/decimal SI suffixes.
pub fn parse_quantity_bytes(q: &str) -> Result<u64, String> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    if num.is_empty() {
        return Err("not a quantity (expected e.g. 10Gi)".to_string());
    }
    let value: f64 = num
        .parse()
        .map_err(|_| "not a quantity (expected e.g. 10Gi)".to_string())?;
    let mul: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "Ki" => 1024.0,
        "Mi" => 1024.0f64.powi(2),
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        other => {
            return Err(format!(
                "unknown suffix {other:?} (use Ki, Mi, Gi, Ti, k, M, G, T)"
            ))
        }
    };
    let bytes = value * mul;
    if !(1.0..9.0e18).contains(&bytes) {
        return Err("size must be at least 1 byte".to_string());
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_quantity_bytes("500M"), Ok(500_000_000));
        assert_eq!(parse_quantity_bytes("1.5Ki"), Ok(1536));
        assert!(parse_quantity_bytes("10GB").is_err());
        assert!(parse_quantity_bytes("Gi").is_err());
        assert!(parse_quantity_bytes("0").is_err());
        assert!(parse_quantity_bytes("").is_err());
    }

    #[test]
    fn memory() {
        assert_eq!(parse_memory("100mb"), Ok(100 * 1024 * 1024));
        assert_eq!(parse_memory("2G"), Ok(2_000_000_000));
        assert!(parse_memory("lots").is_err());
    }
}
