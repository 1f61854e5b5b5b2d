//! One StatefulSet per shard: `<name>-<shard>`, 1 + replicasPerShard pods.
//!
//! Parallel pod management (cluster nodes need no ordered start: the topology engine joins
//! them), OnDelete updates (a restart of a master is a failover decision, the operator's call),
//! preferred anti-affinity inside the shard, probes on the pod IP (readiness: not loading, and a
//! replica linked to its master), non-root pods.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, ExecAction, ObjectFieldSelector, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, SeccompProfile, SecretKeySelector, SecretVolumeSource, SecurityContext,
    TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::auth::{node_auth_secret_name, AUTH_CONF_KEY, AUTH_DIR};
use super::configmap::NODE_CONF_KEY;
use super::{
    child_meta, config_map_name, headless_name, shard_labels, shard_name, shard_selector,
    ChildError, ANNOTATION_CONFIG_HASH, BUS_PORT, CLIENT_PORT, CONFIG_DIR, DATA_DIR,
};
use crate::crd::RedisCluster;
use crate::tls::{CA_KEY, CERT_KEY, KEY_KEY, TLS_DIR};

/// uid/gid of the node process: the `redis` user of the official images, and the user the
/// tessera-node image creates.
pub const NODE_UID: i64 = 999;
/// Name of the node container.
pub const NODE_CONTAINER: &str = "node";
/// Volume with the node auth Secret (`children::auth`).
const AUTH_VOLUME: &str = "auth";
/// Volume with the TLS Secret (spec.tls).
const TLS_VOLUME: &str = "tls";
/// Env var holding the password when spec.auth is set.
pub const PASSWORD_ENV: &str = "REDIS_PASSWORD";
/// Env var holding the operator's password (its Secret), for the readiness probe: it logs in
/// as the operator's user, so it works with `default` off.
pub const ADMIN_PASSWORD_ENV: &str = "TESSERA_OPERATOR_PASSWORD";
/// Env var naming the operator's user, beside [`ADMIN_PASSWORD_ENV`].
pub const ADMIN_USER_ENV: &str = "TESSERA_OPERATOR_USER";

/// Builds shard `shard`'s StatefulSet; `config_hash` goes on the pod template.
pub fn build(rc: &RedisCluster, shard: u32, config_hash: &str) -> Result<StatefulSet, ChildError> {
    let name = rc.name_any();
    let spec = &rc.spec;
    let overrides = spec.pod.clone().unwrap_or_default();

    let mut pod_labels = overrides.labels.clone();
    pod_labels.extend(shard_labels(&name, shard));
    let mut pod_annotations = overrides.annotations.clone();
    pod_annotations.insert(ANNOTATION_CONFIG_HASH.to_string(), config_hash.to_string());

    let mut volumes = vec![Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(&name),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }];
    // The node's logins (children::auth): every pod, spec.auth or not.
    {
        volumes.push(Volume {
            name: AUTH_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(node_auth_secret_name(&name)),
                // Owner and fsGroup (the node's group) only.
                default_mode: Some(0o440),
                optional: Some(false),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    // spec.tls: the certificate, key and CA (crate::tls), refreshed in place by the kubelet.
    if let Some(tls) = &spec.tls {
        volumes.push(Volume {
            name: TLS_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(crate::tls::secret_name(&name, tls)),
                default_mode: Some(0o440),
                optional: Some(false),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    let claim_templates = match &spec.storage {
        Some(storage) => Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                labels: Some(shard_labels(&name, shard)),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: storage.storage_class_name.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(storage.size.clone()),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        }]),
        None => {
            volumes.push(Volume {
                name: "data".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            });
            None
        }
    };

    let affinity = overrides
        .affinity
        .clone()
        .unwrap_or_else(|| shard_anti_affinity(&name, shard));
    let security_context = overrides
        .security_context
        .clone()
        .unwrap_or_else(default_pod_security_context);

    let pod_spec = PodSpec {
        containers: vec![node_container(rc)],
        volumes: Some(volumes),
        affinity: Some(affinity),
        security_context: Some(security_context),
        node_selector: (!overrides.node_selector.is_empty())
            .then(|| overrides.node_selector.clone()),
        tolerations: (!overrides.tolerations.is_empty()).then(|| overrides.tolerations.clone()),
        topology_spread_constraints: (!overrides.topology_spread_constraints.is_empty())
            .then(|| overrides.topology_spread_constraints.clone()),
        priority_class_name: overrides.priority_class_name.clone(),
        enable_service_links: Some(false),
        automount_service_account_token: Some(false),
        termination_grace_period_seconds: Some(termination_grace_seconds(rc)),
        ..PodSpec::default()
    };

    Ok(StatefulSet {
        metadata: child_meta(rc, shard_name(&name, shard), shard_labels(&name, shard))?,
        spec: Some(StatefulSetSpec {
            replicas: Some(1 + spec.replicas_per_shard as i32),
            service_name: Some(headless_name(&name)),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                rolling_update: None,
            }),
            selector: LabelSelector {
                match_labels: Some(shard_selector(&name, shard)),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(pod_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec),
            },
            volume_claim_templates: claim_templates,
            persistent_volume_claim_retention_policy: spec
                .storage
                .as_ref()
                .and_then(|s| s.reclaim_policy)
                .map(|p| StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some(p.as_str().into()),
                    when_scaled: Some(p.as_str().into()),
                }),
            ..StatefulSetSpec::default()
        }),
        status: None,
    })
}

/// The node program for an image: `tessera-node`, `valkey-server` or `redis-server`.
pub fn node_command(image: &str) -> &'static str {
    let repo = image_repository(image);
    if repo.ends_with("tessera-node") {
        "tessera-node"
    } else if repo.contains("valkey") {
        "valkey-server"
    } else {
        "redis-server"
    }
}

/// The port the node serves /metrics on: tessera-node only (redis and valkey images have no
/// such directive), `metrics-port` from spec.config when set (0 turns it off), else
/// [`super::METRICS_PORT`].
pub fn metrics_port(spec: &crate::crd::RedisClusterSpec) -> Option<u16> {
    if node_command(&spec.image_or_default()) != "tessera-node" {
        return None;
    }
    match spec.config.get("metrics-port") {
        Some(v) => v.trim().parse::<u16>().ok().filter(|p| *p != 0),
        None => Some(super::METRICS_PORT),
    }
}

/// Whether the image's node accepts `shutdown-on-sigterm failover` (hand the shard to an in-sync
/// replica before exiting): tessera-node, and valkey-server from 9.0 (an untagged, `latest` or
/// digest-only valkey image counts as current). redis-server refuses the value at start.
pub fn supports_shutdown_failover(image: &str) -> bool {
    match node_command(image) {
        "tessera-node" => true,
        "valkey-server" => image_major_version(image).is_none_or(|major| major >= 9),
        _ => false,
    }
}

/// The leading number of the image tag (`8` in `valkey:8.1-alpine`), if the tag starts with one.
fn image_major_version(image: &str) -> Option<u32> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let tag = no_digest
        .strip_prefix(image_repository(image))?
        .strip_prefix(':')?;
    let digits: String = tag.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `shutdown-timeout` when the node config leaves it alone (Redis 7.0, valkey, tessera-node).
pub const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS: i64 = 10;
/// Longest the shutdown handover waits for the chosen replica to hold the slots.
const HANDOVER_SECONDS: i64 = 3;
/// Time left after the replica wait and the handover for the final RDB/AOF write and exit.
const SHUTDOWN_SAVE_MARGIN_SECONDS: i64 = 17;
/// Kubernetes' default grace period: a short `shutdown-timeout` still leaves time to save.
const MIN_GRACE_SECONDS: i64 = 30;

/// Pods' terminationGracePeriodSeconds: a SIGTERMed master waits up to `shutdown-timeout` for
/// its replicas, up to 3 s for the handover, then saves; SIGKILL must not cut that short
/// (30 s, Kubernetes' default, with the default timeout, and never less).
pub fn termination_grace_seconds(rc: &RedisCluster) -> i64 {
    let timeout = rc
        .spec
        .config
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("shutdown-timeout"))
        .and_then(|(_, v)| v.trim().parse::<i64>().ok())
        .map_or(DEFAULT_SHUTDOWN_TIMEOUT_SECONDS, |t| t.clamp(0, 86_400));
    (timeout + HANDOVER_SECONDS + SHUTDOWN_SAVE_MARGIN_SECONDS).max(MIN_GRACE_SECONDS)
}

/// Image reference without tag or digest.
pub fn image_repository(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    }
}

/// The node container (contract: every path and the address on the command line).
fn node_container(rc: &RedisCluster) -> Container {
    let spec = &rc.spec;
    let image = spec.image_or_default();
    let mut args: Vec<String> = vec![
        format!("{CONFIG_DIR}/{NODE_CONF_KEY}"),
        "--bind".into(),
        "$(POD_IP)".into(),
        "--port".into(),
        // spec.tls: no plaintext port at all.
        if spec.tls.is_some() {
            "0".into()
        } else {
            CLIENT_PORT.to_string()
        },
        "--cluster-announce-ip".into(),
        "$(POD_IP)".into(),
        // The address a master lists this replica under (INFO's slaveN, the shutdown
        // failover's choice of replica): the pod IP, not the connection's source address,
        // which differs wherever traffic is NATed or (kube-in-a-box) all on loopback.
        "--replica-announce-ip".into(),
        "$(POD_IP)".into(),
        "--dir".into(),
        DATA_DIR.into(),
    ];
    let mut env = vec![EnvVar {
        name: "POD_IP".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".into(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    }];
    if let Some(auth) = &spec.auth {
        env.push(EnvVar {
            name: PASSWORD_ENV.into(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: auth.secret_name.clone(),
                    key: auth.key.clone(),
                    optional: Some(false),
                }),
                ..EnvVarSource::default()
            }),
            value: None,
        });
        // redis-cli inside the pod reads this, so `kubectl exec ... redis-cli` just works.
        env.push(EnvVar {
            name: "REDISCLI_AUTH".into(),
            value: Some(format!("$({PASSWORD_ENV})")),
            value_from: None,
        });
    }
    env.push(EnvVar {
        name: ADMIN_USER_ENV.into(),
        value: Some(crate::users::ADMIN_USER.into()),
        value_from: None,
    });
    env.push(EnvVar {
        name: ADMIN_PASSWORD_ENV.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: crate::auth::admin_secret_name(&rc.name_any()),
                key: crate::auth::ACTIVE_KEY.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    });
    // The operator's user, replication login and requirepass from a file (see
    // children::auth), never on the command line.
    args.push("--include".into());
    args.push(format!("{AUTH_DIR}/{AUTH_CONF_KEY}"));
    if spec.tls.is_some() {
        args.push("--tls-port".into());
        args.push(CLIENT_PORT.to_string());
        args.extend(tls_file_args());
    }
    let mut mounts = vec![
        VolumeMount {
            name: "config".into(),
            mount_path: CONFIG_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "data".into(),
            mount_path: DATA_DIR.into(),
            ..VolumeMount::default()
        },
    ];
    mounts.push(VolumeMount {
        name: AUTH_VOLUME.into(),
        mount_path: AUTH_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    if spec.tls.is_some() {
        mounts.push(VolumeMount {
            name: TLS_VOLUME.into(),
            mount_path: TLS_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    let tcp = |port: i32| TCPSocketAction {
        port: IntOrString::Int(port),
        host: None,
    };
    Container {
        name: NODE_CONTAINER.into(),
        image: Some(image.clone()),
        image_pull_policy: spec.image_pull_policy.map(|p| p.as_str().to_string()),
        command: Some(vec![node_command(&image).to_string()]),
        args: Some(args),
        env: Some(env),
        ports: Some(
            vec![
                ContainerPort {
                    name: Some("client".into()),
                    container_port: CLIENT_PORT,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                },
                ContainerPort {
                    name: Some("bus".into()),
                    container_port: BUS_PORT,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                },
            ]
            .into_iter()
            .chain(metrics_port(spec).map(|p| ContainerPort {
                name: Some("metrics".into()),
                container_port: i32::from(p),
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            }))
            .collect(),
        ),
        resources: spec.resources.clone(),
        volume_mounts: Some(mounts),
        // Startup: loading a big RDB/AOF can take minutes; don't kill the node meanwhile
        // (10 min before liveness starts).
        startup_probe: Some(Probe {
            tcp_socket: Some(tcp(CLIENT_PORT)),
            period_seconds: Some(5),
            failure_threshold: Some(120),
            ..Probe::default()
        }),
        // Ready = serving its data: not loading it, and a replica is linked to its master (a
        // replica that is not has nothing current to serve, and a drain under the PDB must not
        // take its master meanwhile). Cluster-level health (slots, state) is the operator's
        // status, not a pod's: unreadying pods on cluster_state=fail would only make a bad
        // situation worse. The operator's topology work uses pod IPs, not readiness.
        readiness_probe: Some(Probe {
            exec: Some(ExecAction {
                command: Some(ready_command(&image, spec.tls.is_some())),
            }),
            period_seconds: Some(5),
            timeout_seconds: Some(4),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        // Alive = the cluster bus listens: a node without it cannot gossip or fail over.
        liveness_probe: Some(Probe {
            tcp_socket: Some(tcp(BUS_PORT)),
            period_seconds: Some(10),
            failure_threshold: Some(6),
            ..Probe::default()
        }),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

/// The readiness check for an image's node (see `readiness_probe` above). Exec probes get no
/// `$(VAR)` expansion from the kubelet for env set from fields, so the address comes from the
/// environment at run time. tessera-node images have no shell: the binary checks itself
/// (`--ready-probe`); redis and valkey images run their CLI under `sh`, logged in as the
/// operator's user (password from the environment, not the command line), so the probe works
/// with `default` off; `REDISCLI_AUTH` stays spec.auth's for humans' `kubectl exec`. A node
/// that refuses the login counts as ready when it answers, as with a TCP probe.
pub fn ready_command(image: &str, tls: bool) -> Vec<String> {
    let cli = match node_command(image) {
        "tessera-node" => {
            let mut v = vec![
                "tessera-node".into(),
                "--ready-probe".into(),
                CLIENT_PORT.to_string(),
            ];
            if tls {
                v.extend(tls_file_args());
            }
            return v;
        }
        "valkey-server" => {
            "c=valkey-cli; command -v $c >/dev/null 2>&1 || c=redis-cli\n\
             if [ -n \"$REDISCLI_AUTH\" ]; then export VALKEYCLI_AUTH=\"$REDISCLI_AUTH\"; fi\n"
        }
        _ => "c=redis-cli\n",
    };
    // The operator's login when the pod has it (every pod this operator makes), else the
    // default user's (REDISCLI_AUTH), as before.
    let tls_args = if tls {
        format!(" --tls --cert {TLS_DIR}/{CERT_KEY} --key {TLS_DIR}/{KEY_KEY} --cacert {TLS_DIR}/{CA_KEY}")
    } else {
        String::new()
    };
    let script = format!(
        "u=\nif [ -n \"${ADMIN_PASSWORD_ENV}\" ]; then\n\
         \x20 export REDISCLI_AUTH=\"${ADMIN_PASSWORD_ENV}\"; u=\"--user ${ADMIN_USER_ENV}\"\n\
         fi\n\
         {cli}i=$($c{tls_args} $u --no-auth-warning -h \"${{POD_IP:-127.0.0.1}}\" -p {CLIENT_PORT} INFO 2>/dev/null | tr -d '\\r')\n\
         case \"$i\" in NOAUTH*) exit 0;; esac\n\
         printf '%s\\n' \"$i\" | grep -qx 'loading:0' || exit 1\n\
         if printf '%s\\n' \"$i\" | grep -qx 'role:slave'; then\n\
         \x20 printf '%s\\n' \"$i\" | grep -qx 'master_link_status:up'\n\
         fi\n"
    );
    vec!["sh".into(), "-c".into(), script]
}

/// The node's certificate, key and CA (spec.tls), as tessera-node and redis-server take them;
/// the same certificate is the client certificate of its bus and replication links.
fn tls_file_args() -> Vec<String> {
    vec![
        "--tls-cert-file".into(),
        format!("{TLS_DIR}/{CERT_KEY}"),
        "--tls-key-file".into(),
        format!("{TLS_DIR}/{KEY_KEY}"),
        "--tls-ca-cert-file".into(),
        format!("{TLS_DIR}/{CA_KEY}"),
    ]
}

/// Non-root pod defaults; fsGroup makes PVCs writable by the node user.
fn default_pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(NODE_UID),
        run_as_group: Some(NODE_UID),
        fs_group: Some(NODE_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    }
}

/// Prefer spreading one shard's pods over nodes, so losing a node never takes a master with
/// all its replicas.
fn shard_anti_affinity(name: &str, shard: u32) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(shard_selector(name, shard)),
                            match_expressions: None,
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            required_during_scheduling_ignored_during_execution: None,
        }),
        ..Affinity::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_from_image() {
        assert_eq!(node_command("tessera/tessera-node:0.1.0"), "tessera-node");
        assert_eq!(node_command("localhost:5000/tessera-node"), "tessera-node");
        assert_eq!(node_command("redis:7.0"), "redis-server");
        assert_eq!(node_command("valkey/valkey:8@sha256:abc"), "valkey-server");
        assert_eq!(
            image_repository("localhost:5000/x/y:1"),
            "localhost:5000/x/y"
        );
        assert_eq!(image_repository("localhost:5000/x/y"), "localhost:5000/x/y");
    }
}
