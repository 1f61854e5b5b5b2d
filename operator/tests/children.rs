//! Spec → children, from YAML fixtures: golden files (regenerate with UPDATE_FIXTURES=1 and
//! review the diff) plus targeted assertions on what matters for a cluster node.

use std::path::PathBuf;

use serde_json::Value;
use tessera_operator::children::{self, Children};
use tessera_operator::crd::RedisCluster;
use tessera_testkit::{free_port, redis_bin, tessera_bin, valkey_bin, Launch, Server};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/children")
}

fn load(name: &str) -> RedisCluster {
    let text = std::fs::read_to_string(fixtures().join(format!("{name}.yaml"))).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn render(c: &Children) -> String {
    let mut docs = vec![
        serde_yaml::to_string(&c.config_map).unwrap(),
        serde_yaml::to_string(&c.headless_service).unwrap(),
        serde_yaml::to_string(&c.client_service).unwrap(),
    ];
    docs.extend(
        c.stateful_sets
            .iter()
            .map(|s| serde_yaml::to_string(s).unwrap()),
    );
    docs.extend(c.pdbs.iter().map(|s| serde_yaml::to_string(s).unwrap()));
    docs.join("---\n")
}

fn golden(name: &str) -> Children {
    let rc = load(name);
    let built = children::build(&rc).unwrap();
    let text = render(&built);
    let path = fixtures().join(format!("{name}.children.yaml"));
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing: run with UPDATE_FIXTURES=1", path.display()));
    assert!(
        want == text,
        "{} differs from the builders' output (UPDATE_FIXTURES=1 to accept):\n{text}",
        path.display()
    );
    built
}

fn json<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap()
}

#[test]
fn minimal_children() {
    let c = golden("minimal");
    assert_eq!(c.stateful_sets.len(), 3);
    assert_eq!(c.pdbs.len(), 3);
    let sts = json(&c.stateful_sets[1]);
    assert_eq!(sts["metadata"]["name"], "demo-1");
    assert_eq!(sts["metadata"]["namespace"], "apps");
    assert_eq!(sts["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(
        sts["metadata"]["ownerReferences"][0]["uid"],
        "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
    );
    assert_eq!(sts["spec"]["replicas"], 2);
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(sts["spec"]["updateStrategy"]["type"], "OnDelete");
    assert_eq!(sts["spec"]["serviceName"], "demo-nodes");
    assert_eq!(
        sts["spec"]["selector"]["matchLabels"]["tessera.rs/shard"],
        "1"
    );
    let pod = &sts["spec"]["template"]["spec"];
    let node = &pod["containers"][0];
    assert_eq!(node["command"][0], "redis-server");
    let args: Vec<&str> = node["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "/etc/tessera/node.conf",
            "--bind",
            "$(POD_IP)",
            "--port",
            "6379",
            "--cluster-announce-ip",
            "$(POD_IP)",
            "--replica-announce-ip",
            "$(POD_IP)",
            "--dir",
            "/data",
            "--include",
            "/etc/tessera-auth/auth.conf"
        ]
    );
    assert_eq!(
        node["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "status.podIP"
    );
    assert!(
        node["livenessProbe"]["tcpSocket"]["host"].is_null()
            && node["startupProbe"]["tcpSocket"]["host"].is_null(),
        "probes target the pod IP"
    );
    assert_eq!(node["livenessProbe"]["tcpSocket"]["port"], 16379);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 999);
    assert_eq!(node["securityContext"]["allowPrivilegeEscalation"], false);
    assert!(pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == "data" && v["emptyDir"].is_object()));
    assert!(sts["spec"]["volumeClaimTemplates"].is_null());
    let anti =
        &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        anti["podAffinityTerm"]["labelSelector"]["matchLabels"]["tessera.rs/shard"],
        "1"
    );

    let conf = c.config_map.data.as_ref().unwrap()["node.conf"].clone();
    assert!(conf.contains("cluster-enabled yes\n"));
    assert!(conf.contains("cluster-config-file nodes.conf\n"));
    assert!(conf.contains("cluster-node-timeout 15000\n"));
    // Peers and clients come from other pod IPs: protected mode (which since Redis 7
    // ignores `bind`) would refuse them while no password is set.
    assert!(conf.contains("\nprotected-mode no\n"));
    assert!(conf.contains("appendonly no\n"));
    assert!(
        !conf.lines().any(|l| l
            .split_whitespace()
            .nth(1)
            .is_some_and(|v| v.starts_with('/'))),
        "no absolute paths: {conf}"
    );

    let headless = json(&c.headless_service);
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(headless["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(headless["spec"]["ports"][1]["port"], 16379);
    let client = json(&c.client_service);
    assert_eq!(client["metadata"]["name"], "demo");
    assert_eq!(client["spec"]["type"], "ClusterIP");
    let pdb = json(&c.pdbs[2]);
    assert_eq!(pdb["metadata"]["name"], "demo-2");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
}

#[test]
fn production_children() {
    let c = golden("production");
    let sts = json(&c.stateful_sets[0]);
    assert_eq!(sts["spec"]["replicas"], 3);
    let pod = &sts["spec"]["template"]["spec"];
    let node = &pod["containers"][0];
    assert_eq!(node["command"][0], "tessera-node");
    assert_eq!(node["imagePullPolicy"], "IfNotPresent");
    assert_eq!(node["resources"]["limits"]["memory"], "2Gi");
    let args = node["args"].to_string();
    assert!(
        args.contains("\"--include\",\"/etc/tessera-auth/auth.conf\""),
        "{args}"
    );
    let env = node["env"].as_array().unwrap();
    let pw = env.iter().find(|e| e["name"] == "REDIS_PASSWORD").unwrap();
    assert_eq!(pw["valueFrom"]["secretKeyRef"]["name"], "cache-auth");
    assert_eq!(pw["valueFrom"]["secretKeyRef"]["key"], "password");
    let claim = &sts["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["metadata"]["name"], "data");
    assert_eq!(claim["spec"]["storageClassName"], "fast-ssd");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "20Gi");
    assert!(!pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == "data"));
    assert_eq!(
        pod["topologySpreadConstraints"][0]["topologyKey"],
        "topology.kubernetes.io/zone"
    );
    assert_eq!(pod["tolerations"][0]["value"], "redis");
    assert_eq!(pod["priorityClassName"], "high");
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["team"], "payments");
    assert_eq!(labels["tessera.rs/cluster"], "cache");
    let conf = c.config_map.data.as_ref().unwrap()["node.conf"].clone();
    assert!(conf.contains("cluster-node-timeout 5000\n"));
    assert!(conf.contains("appendonly yes\n"));
    assert!(conf.contains("maxmemory 1536mb\n"));
    assert!(
        !conf.contains("requirepass"),
        "the password never lands in a ConfigMap"
    );
    let client = json(&c.client_service);
    assert_eq!(client["spec"]["type"], "LoadBalancer");
    assert_eq!(
        client["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-internal"],
        "true"
    );
}

#[test]
fn user_config_overrides_persistence_defaults() {
    let mut rc = load("minimal");
    rc.spec.config.insert("appendonly".into(), "yes".into());
    let conf = children::configmap::node_conf(&rc);
    assert_eq!(conf.matches("appendonly").count(), 1, "{conf}");
    assert!(conf.contains("appendonly yes\n"));
}

#[test]
fn missing_uid_is_an_error() {
    let mut rc = load("minimal");
    rc.metadata.uid = None;
    assert!(children::build(&rc).is_err());
}

#[test]
fn reclaim_policy_maps_to_the_retention_policy() {
    use tessera_operator::crd::ReclaimPolicy;
    let mut rc = load("production");
    let sts = json(&children::build(&rc).unwrap().stateful_sets[0]);
    assert!(
        sts["spec"]["persistentVolumeClaimRetentionPolicy"].is_null(),
        "absent: the Kubernetes default (Retain)"
    );
    for (policy, want) in [
        (ReclaimPolicy::Delete, "Delete"),
        (ReclaimPolicy::Retain, "Retain"),
    ] {
        rc.spec.storage.as_mut().unwrap().reclaim_policy = Some(policy);
        for s in children::build(&rc).unwrap().stateful_sets {
            let p = &json(&s)["spec"]["persistentVolumeClaimRetentionPolicy"];
            assert_eq!(p["whenDeleted"], want, "{p}");
            assert_eq!(p["whenScaled"], want, "{p}");
        }
    }
    let rc: RedisCluster = serde_yaml::from_str(
        &std::fs::read_to_string(fixtures().join("production.yaml"))
            .unwrap()
            .replace(
                "    storageClassName: fast-ssd\n",
                "    storageClassName: fast-ssd\n    reclaimPolicy: Delete\n",
            ),
    )
    .unwrap();
    assert_eq!(
        rc.spec.storage.unwrap().reclaim_policy,
        Some(ReclaimPolicy::Delete)
    );
}

/// `rc` with another image.
fn with_image(name: &str, image: &str) -> RedisCluster {
    let mut rc = load(name);
    rc.spec.image = Some(image.into());
    rc
}

/// The value of `directive` in node.conf (the last one wins, as in the servers).
fn directive(conf: &str, directive: &str) -> Option<String> {
    conf.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| *k == directive)
        .map(|(_, v)| v.to_string())
        .next_back()
}

#[test]
fn shutdown_failover_only_on_images_that_accept_it() {
    for (image, want) in [
        ("tessera/tessera-node:0.1.0", Some("failover")),
        ("localhost:5000/tessera-node", Some("failover")),
        ("valkey/valkey:9.0", Some("failover")),
        ("valkey/valkey:9", Some("failover")),
        ("valkey/valkey:10.1-alpine", Some("failover")),
        ("valkey/valkey:latest", Some("failover")),
        ("valkey/valkey@sha256:abc", Some("failover")),
        ("valkey/valkey:8.1", None),
        ("valkey/valkey:7.2.5-alpine", None),
        ("redis:7.0", None),
        ("bitnami/redis:7.2", None),
    ] {
        for fixture in ["minimal", "production"] {
            let conf = children::configmap::node_conf(&with_image(fixture, image));
            assert_eq!(
                directive(&conf, "shutdown-on-sigterm").as_deref(),
                want,
                "{image} ({fixture}):\n{conf}"
            );
        }
    }
    // The user's value replaces the operator's (e.g. `nosave` to skip the final save).
    let mut rc = with_image("production", "tessera/tessera-node:0.1.0");
    rc.spec
        .config
        .insert("shutdown-on-sigterm".into(), "nosave failover".into());
    let conf = children::configmap::node_conf(&rc);
    assert_eq!(conf.matches("shutdown-on-sigterm").count(), 1, "{conf}");
    assert!(conf.contains("shutdown-on-sigterm nosave failover\n"));
}

/// Seconds between SIGTERM and SIGKILL for `rc`'s pods.
fn grace(rc: &RedisCluster) -> i64 {
    let sts = json(&children::build(rc).unwrap().stateful_sets[0]);
    sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap()
}

#[test]
fn grace_period_covers_the_shutdown_handover() {
    // The node waits up to shutdown-timeout (10 s by default) for its replicas, then up to
    // 3 s for the handover, then saves: the kubelet must not SIGKILL it meanwhile.
    for fixture in ["minimal", "production"] {
        let rc = load(fixture);
        assert!(grace(&rc) >= 10 + 3 + 10, "{fixture}: {}", grace(&rc));
    }
    let mut rc = load("production");
    rc.spec
        .config
        .insert("shutdown-timeout".into(), "60".into());
    assert!(grace(&rc) >= 60 + 3 + 10, "{}", grace(&rc));
    rc.spec.config.insert("shutdown-timeout".into(), "1".into());
    assert!(
        grace(&rc) >= 30,
        "never below Kubernetes' default: {}",
        grace(&rc)
    );
}

/// Starts `bin` (the kit's spawner) with `rc`'s node.conf first and the pod's own arguments
/// (address, port, dir), and returns `CONFIG GET shutdown-on-sigterm` once it answers; a
/// refused node.conf fails the start with the server's output.
fn start_with_generated_conf(bin: &str, rc: &RedisCluster) -> String {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("node.conf");
    std::fs::write(&conf, children::configmap::node_conf(rc)).unwrap();
    let server = Launch::new(bin)
        .verbatim()
        .args(&[conf.to_str().unwrap()])
        .args(&["--bind", "{ip}", "--port", "{port}", "--dir", "{dir}"])
        .ready_within(std::time::Duration::from_secs(10))
        .start();
    let mut c = server.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("shutdown-on-sigterm")
        .query(&mut c)
        .unwrap();
    got.get(1).cloned().unwrap_or_default()
}

#[test]
fn every_node_program_accepts_its_generated_conf() {
    for (bin, image, want) in [
        (tessera_bin(), "tessera/tessera-node:0.1.0", "failover"),
        (valkey_bin(), "valkey/valkey:9.1", "failover"),
        (redis_bin(), "redis:7.0", "default"),
    ] {
        for fixture in ["minimal", "production"] {
            let got = start_with_generated_conf(bin, &with_image(fixture, image));
            assert_eq!(got, want, "{bin} ({fixture})");
        }
    }
}

#[test]
fn pdb_never_lets_a_drain_take_a_shards_last_copy() {
    let mut rc = load("minimal");
    for (replicas, want) in [(0, 0), (1, 1), (2, 1), (5, 1)] {
        rc.spec.replicas_per_shard = replicas;
        let c = children::build(&rc).unwrap();
        assert_eq!(c.pdbs.len(), 3);
        for (shard, pdb) in c.pdbs.iter().enumerate() {
            let pdb = json(pdb);
            assert_eq!(
                pdb["spec"]["maxUnavailable"], want,
                "replicasPerShard {replicas}: {pdb}"
            );
            assert!(pdb["spec"]["minAvailable"].is_null(), "{pdb}");
            assert_eq!(
                pdb["spec"]["selector"]["matchLabels"]["tessera.rs/shard"],
                shard.to_string()
            );
        }
    }
}

/// The node container of shard 0 of `rc`, as JSON.
fn node_container(rc: &RedisCluster) -> Value {
    let sts = json(&children::build(rc).unwrap().stateful_sets[0]);
    sts["spec"]["template"]["spec"]["containers"][0].clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn readiness_is_an_exec_probe_each_image_can_run() {
    for (image, program) in [
        ("tessera/tessera-node:0.1.0", "tessera-node"),
        ("redis:7.0", "sh"),
        ("valkey/valkey:9.1", "sh"),
    ] {
        for fixture in ["minimal", "production"] {
            let node = node_container(&with_image(fixture, image));
            let ready = &node["readinessProbe"];
            assert!(ready["tcpSocket"].is_null(), "{image}: {ready}");
            let cmd = strings(&ready["exec"]["command"]);
            assert_eq!(cmd[0], program, "{image}: {cmd:?}");
            assert!(
                !cmd.iter()
                    .any(|a| a.contains("$(POD_IP)") || a.contains("$(REDIS")),
                "the kubelet does not expand $(POD_IP) in probes: {cmd:?}"
            );
            assert!(ready["timeoutSeconds"].as_i64().unwrap() >= 2, "{ready}");
            // Loading a big dataset may take minutes: the startup probe (TCP) waits long
            // enough before liveness and readiness start.
            let startup = &node["startupProbe"];
            assert!(startup["tcpSocket"].is_object(), "{startup}");
            let budget = startup["periodSeconds"].as_i64().unwrap()
                * startup["failureThreshold"].as_i64().unwrap();
            assert!(budget >= 600, "{startup}");
        }
    }
    let redis = strings(
        &node_container(&with_image("minimal", "redis:7.0"))["readinessProbe"]["exec"]["command"],
    );
    assert!(redis[2].contains("redis-cli"), "{redis:?}");
    let valkey = strings(
        &node_container(&with_image("minimal", "valkey/valkey:8"))["readinessProbe"]["exec"]
            ["command"],
    );
    assert!(valkey[2].contains("valkey-cli"), "{valkey:?}");
}

/// A plain (non-cluster) server on a free port (the kit's spawner); killed on drop.
fn start_plain(bin: &str, extra: &[&str]) -> (Server, u16) {
    let server = Launch::new(bin).args(&["--save", ""]).args(extra).start();
    let port = server.port;
    (server, port)
}

/// Runs `rc`'s readiness probe command against a node on 127.0.0.1:`port`, with the pod's env
/// (POD_IP, REDISCLI_AUTH) as the kubelet would; `tessera-node` is the freshly built binary.
fn probe_ready(rc: &RedisCluster, port: u16, password: Option<&str>) -> bool {
    probe_ready_as(rc, port, password, None)
}

/// [`probe_ready`], with the operator's password in the pod's env when `admin` is given.
fn probe_ready_as(
    rc: &RedisCluster,
    port: u16,
    password: Option<&str>,
    admin: Option<&str>,
) -> bool {
    let cmd = strings(&node_container(rc)["readinessProbe"]["exec"]["command"]);
    let cmd: Vec<String> = cmd
        .iter()
        .map(|a| a.replace("6379", &port.to_string()))
        .collect();
    let program = match cmd[0].as_str() {
        "tessera-node" => tessera_bin(),
        other => other,
    };
    let mut c = std::process::Command::new(program);
    c.args(&cmd[1..]).env_clear().env("POD_IP", "127.0.0.1");
    if let Some(path) = std::env::var_os("PATH") {
        c.env("PATH", path);
    }
    if let Some(pw) = password {
        c.env("REDISCLI_AUTH", pw);
    }
    if let Some(pw) = admin {
        c.env("TESSERA_OPERATOR_USER", "tessera-operator")
            .env("TESSERA_OPERATOR_PASSWORD", pw);
    }
    // Bounded: a probe that hangs fails the test instead of hanging it.
    let out = tessera_testkit::output_within(&mut c, std::time::Duration::from_secs(30));
    eprintln!(
        "probe {cmd:?}: {} {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.success()
}

/// Polls the probe until it says `want` (bounded: 30 s; a redis-server replica's first sync
/// alone waits repl-diskless-sync-delay, 5 s).
fn probe_until(rc: &RedisCluster, port: u16, password: Option<&str>, want: bool) {
    for _ in 0..150 {
        if probe_ready(rc, port, password) == want {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("readiness probe never said {want} for port {port}");
}

#[test]
fn readiness_probe_tells_the_truth() {
    for (bin, image) in [
        (tessera_bin(), "tessera/tessera-node:0.1.0"),
        (redis_bin(), "redis:7.0"),
        (valkey_bin(), "valkey/valkey:9.1"),
    ] {
        let rc = with_image("minimal", image);
        let (_master, master_port) = start_plain(bin, &[]);
        probe_until(&rc, master_port, None, true);
        // A replica of a master that does not answer: not ready.
        let dead = free_port();
        let (_lost, lost_port) = start_plain(bin, &["--replicaof", "127.0.0.1", &dead.to_string()]);
        probe_until(&rc, lost_port, None, false);
        // A replica linked to its master: ready.
        let mp = master_port.to_string();
        let (_linked, linked_port) = start_plain(bin, &["--replicaof", "127.0.0.1", &mp]);
        probe_until(&rc, linked_port, None, true);
        // Nothing listening: not ready.
        assert!(!probe_ready(&rc, dead, None), "{image}");

        // With a password: the right one sees the replica's link; a password changed live
        // (the pod's env is stale) still lets an answering node be ready.
        let (_auth, auth_port) =
            start_plain(bin, &["--requirepass", "s3cret", "--masterauth", "s3cret"]);
        probe_until(&rc, auth_port, Some("s3cret"), true);
        probe_until(&rc, auth_port, Some("stale"), true);
        let ap = auth_port.to_string();
        let (_lost_auth, lost_auth_port) = start_plain(
            bin,
            &[
                "--requirepass",
                "s3cret",
                "--replicaof",
                "127.0.0.1",
                &dead.to_string(),
            ],
        );
        probe_until(&rc, lost_auth_port, Some("s3cret"), false);
        let (_linked_auth, linked_auth_port) = start_plain(
            bin,
            &[
                "--requirepass",
                "s3cret",
                "--masterauth",
                "s3cret",
                "--replicaof",
                "127.0.0.1",
                &ap,
            ],
        );
        probe_until(&rc, linked_auth_port, Some("s3cret"), true);
    }
}

/// A pod of shard `shard`, ordinal `ordinal`, with the given container `started` and Ready.
fn pod(shard: u32, ordinal: u32, started: bool, ready: bool) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("demo-{shard}-{ordinal}"),
                     "labels": {"tessera.rs/cluster": "demo", "tessera.rs/shard": shard.to_string()}},
        "status": {"podIP": format!("10.0.{shard}.{ordinal}"),
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                   "containerStatuses": [{"name": "node", "image": "x", "imageID": "", "ready": ready,
                                          "restartCount": 0, "started": started}]}
    }))
    .unwrap()
}

#[test]
fn forming_waits_for_started_pods_not_ready_ones() {
    use tessera_operator::pods::{all_desired_ready, all_desired_started};
    // Pods back on kept volumes: replicas whose masters moved are unready (link down) until
    // the operator joins the cluster up again, so forming must not wait for Ready.
    let pods = vec![
        pod(0, 0, true, true),
        pod(0, 1, true, false),
        pod(1, 0, true, true),
        pod(1, 1, true, false),
    ];
    assert!(!all_desired_ready(&pods, 2, 1));
    assert!(all_desired_started(&pods, 2, 1));
    assert!(!all_desired_started(&pods[..3], 2, 1), "a pod missing");
    let mut not_started = pods.clone();
    not_started[3] = pod(1, 1, false, false);
    assert!(!all_desired_started(&not_started, 2, 1));
    let mut terminating = pods.clone();
    terminating[0].metadata.deletion_timestamp =
        serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap();
    assert!(!all_desired_started(&terminating, 2, 1));
    let mut no_ip = pods.clone();
    no_ip[2].status.as_mut().unwrap().pod_ip = None;
    assert!(!all_desired_started(&no_ip, 2, 1));
}

#[test]
fn password_never_on_a_nodes_command_line() {
    let node = node_container(&load("production"));
    let args = strings(&node["args"]);
    assert!(
        !args
            .iter()
            .any(|a| a.contains("PASSWORD") || a.contains("pass")),
        "{args:?}"
    );
    let at = args
        .iter()
        .position(|a| a == "--include")
        .expect("--include");
    assert_eq!(args[at + 1], "/etc/tessera-auth/auth.conf");
    let mount = node["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/etc/tessera-auth")
        .unwrap()
        .clone();
    assert_eq!(mount["readOnly"], true);
    let sts = json(&children::build(&load("production")).unwrap().stateful_sets[0]);
    let vol = sts["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap()
        .clone();
    assert_eq!(vol["secret"]["secretName"], "cache-node-auth");
    assert_eq!(vol["secret"]["defaultMode"], 0o440, "{vol}");
    // redis-cli in the pod (and the readiness probe) still find it in the environment.
    let env = node["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "REDISCLI_AUTH"));
    // Without spec.auth: the file still (the operator's user), no password env.
    let plain = node_container(&load("minimal"));
    assert!(strings(&plain["args"]).contains(&"--include".to_string()));
    let plain_env = plain["env"].as_array().unwrap();
    assert!(!plain_env.iter().any(|e| e["name"] == "REDISCLI_AUTH"));
    let admin = plain_env
        .iter()
        .find(|e| e["name"] == "TESSERA_OPERATOR_PASSWORD")
        .expect("operator password env");
    assert_eq!(
        admin["valueFrom"]["secretKeyRef"]["name"],
        "demo-operator-admin"
    );
}

#[test]
fn node_auth_secret_holds_the_password_as_config() {
    let rc = load("production");
    let logins = children::auth::NodeLogins {
        admin_password: "adm",
        requirepass: Some("pw"),
    };
    let s = json(&children::auth::build(&rc, logins).unwrap());
    assert_eq!(s["metadata"]["name"], "cache-node-auth");
    assert_eq!(s["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(s["metadata"]["labels"]["tessera.rs/cluster"], "cache");
    assert_eq!(s["type"], "Opaque");
    let conf = children::auth::auth_conf(logins, None);
    assert!(
        conf.ends_with("masterauth \"adm\"\nrequirepass \"pw\"\n"),
        "{conf}"
    );
    // The pod template does not change with the password: a new password restarts no pod.
    let a = children::build(&rc).unwrap();
    assert_eq!(a, children::build(&rc).unwrap());
}

#[test]
fn every_node_program_reads_the_password_from_the_included_file() {
    let password = "p@ss w\"o\\rd 'x' #1 é";
    for bin in [tessera_bin(), redis_bin(), valkey_bin()] {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("auth.conf");
        let logins = children::auth::NodeLogins {
            admin_password: "0123abcd",
            requirepass: Some(password),
        };
        std::fs::write(&conf, children::auth::auth_conf(logins, None)).unwrap();
        let (server, port) = start_plain(bin, &["--include", conf.to_str().unwrap()]);
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.pid())).unwrap();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains("p@ss"),
            "{bin}: {}",
            String::from_utf8_lossy(&cmdline)
        );
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut c = client
            .get_connection_with_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let refused: redis::RedisResult<String> = redis::cmd("PING").query(&mut c);
        assert!(refused.is_err(), "{bin}: no password needed?");
        let ok: String = redis::cmd("AUTH").arg(password).query(&mut c).unwrap();
        assert_eq!(ok, "OK", "{bin}");
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("masterauth")
            .query(&mut c)
            .unwrap();
        assert_eq!(got[1], "0123abcd", "{bin}: masterauth is the operator's");
        let ok: String = redis::cmd("AUTH")
            .arg("tessera-operator")
            .arg("0123abcd")
            .query(&mut c)
            .unwrap();
        assert_eq!(ok, "OK", "{bin}");
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("masteruser")
            .query(&mut c)
            .unwrap();
        assert_eq!(got[1], "tessera-operator", "{bin}");
    }
}

/// `default` declared `off` in spec.users: the included file starts every node program with
/// `default` off (AUTH as default refused, even with spec.auth's password) and the operator's
/// user working; a replica started from the same file syncs from its master through
/// `masteruser`.
#[test]
fn a_node_started_from_the_file_has_default_off_and_replicates_as_the_operator() {
    for bin in [tessera_bin(), redis_bin(), valkey_bin()] {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("auth.conf");
        let logins = children::auth::NodeLogins {
            admin_password: "adm1n",
            requirepass: Some("s3cret"),
        };
        std::fs::write(&conf, children::auth::auth_conf(logins, Some("off"))).unwrap();
        let c = conf.to_str().unwrap();
        let (_master, mport) = start_plain(bin, &["--include", c]);
        let mp = mport.to_string();
        let (_replica, rport) =
            start_plain(bin, &["--include", c, "--replicaof", "127.0.0.1", &mp]);
        let open = |port: u16| {
            redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection_with_timeout(std::time::Duration::from_secs(5))
                .unwrap()
        };
        let mut m = open(mport);
        let refused: redis::RedisResult<String> = redis::cmd("AUTH").arg("s3cret").query(&mut m);
        assert!(refused.is_err(), "{bin}: default is off");
        let ok: String = redis::cmd("AUTH")
            .arg("tessera-operator")
            .arg("adm1n")
            .query(&mut m)
            .unwrap();
        assert_eq!(ok, "OK", "{bin}");
        let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut m).unwrap();
        assert!(
            list.iter().any(|l| l.starts_with("user default off ")),
            "{bin}: {list:?}"
        );
        let mut r = open(rport);
        let _: String = redis::cmd("AUTH")
            .arg("tessera-operator")
            .arg("adm1n")
            .query(&mut r)
            .unwrap();
        let mut info = String::new();
        for _ in 0..150 {
            info = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
            if info.contains("master_link_status:up") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert!(info.contains("master_link_status:up"), "{bin}: {info}");
        // The readiness probe logs in as the operator's user.
        let rc = with_image(
            "minimal",
            if bin == redis_bin() {
                "redis:7.0"
            } else {
                "valkey/valkey:9.1"
            },
        );
        if bin != tessera_bin() {
            assert!(probe_ready_as(&rc, rport, None, Some("adm1n")), "{bin}");
            let dead = free_port().to_string();
            let (_lost, lport) =
                start_plain(bin, &["--include", c, "--replicaof", "127.0.0.1", &dead]);
            assert!(
                !probe_ready_as(&rc, lport, None, Some("adm1n")),
                "{bin}: lost link"
            );
        }
    }
}
