//! Changing the node password live (`tessera_operator::auth::switch`) on real nodes, against
//! redis-server 7.0 and tessera-node: a switch interrupted half-way leaves the topology engine
//! able to log in (fallback passwords), every node ends on the new password only, replicas
//! re-attach to their masters with the new masterauth, no key is lost, and the password can
//! be removed again the same way.

mod common_topology;

use std::time::Duration;

use common_topology::*;
use tessera_operator::auth;
use tessera_topology::{reconcile, Desired, EngineOptions};

const LIMIT: Duration = Duration::from_secs(120);
const KEYS: usize = 2000;

fn url(n: &Node, pw: Option<&str>) -> String {
    match pw {
        Some(p) => format!("redis://:{p}@{}/", n.addr()),
        None => format!("redis://{}/", n.addr()),
    }
}

/// True when a new connection with `pw` (None: no AUTH) may run PING.
async fn accepts(n: &Node, pw: Option<&str>) -> bool {
    match open(&url(n, pw)).await {
        Ok(mut c) => redis::cmd("PING")
            .query_async::<String>(&mut c)
            .await
            .is_ok(),
        Err(_) => false,
    }
}

async fn info_replication(n: &Node, pw: Option<&str>) -> String {
    let mut c = open(&url(n, pw)).await.expect("connect");
    redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut c)
        .await
        .expect("INFO replication")
}

/// Waits until every replica among `nodes` has its master link up (bounded).
async fn replicas_linked(nodes: &[Node], pw: Option<&str>) {
    for n in nodes {
        let mut last = String::new();
        for _ in 0..300 {
            last = info_replication(n, pw).await;
            if !last.contains("role:slave") || last.contains("master_link_status:up") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            !last.contains("role:slave") || last.contains("master_link_status:up"),
            "{}: replica link not up: {last}",
            n.addr()
        );
    }
}

async fn scenario(bin: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let auth_args = ["--requirepass", "old", "--masterauth", "old"];
    let nodes = start_nodes(bin, tmp.path(), 4, &auth_args).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let pods = endpoints(&refs, 2);
    let desired = Desired {
        shards: 2,
        replicas_per_shard: 1,
        paused: false,
    };
    let old_opts = EngineOptions {
        password: Some("old".into()),
        ..test_opts()
    };
    converge(2, 1, &pods, &old_opts, LIMIT).await;
    {
        let client = cluster_builder(vec![url(&nodes[0], Some("old"))])
            .build()
            .expect("client");
        let conn = client.get_async_connection().await.expect("connect");
        load_keys(&conn, 0..KEYS).await;
    }
    replicas_linked(&nodes, Some("old")).await;

    // Half the nodes first, as when a switch is interrupted: the engine still logs in to
    // every node, trying the new password, then the old one.
    let changed = auth::switch(&pods[..2], &test_opts(), Some("new"), Some("old"))
        .await
        .expect("switch half");
    assert_eq!(changed, 2);
    let mixed = EngineOptions {
        password: Some("new".into()),
        fallback_passwords: auth::candidates(Some("new"), Some("old"))
            .into_iter()
            .skip(1)
            .collect(),
        ..test_opts()
    };
    let report = reconcile(&desired, &pods, &mixed)
        .await
        .expect("the engine logs in with either password");
    assert!(report.converged, "{report:?}");

    // The rest: only the two old nodes change.
    let changed = auth::switch(&pods, &test_opts(), Some("new"), Some("old"))
        .await
        .expect("switch all");
    assert_eq!(changed, 2);
    for n in &nodes {
        assert!(accepts(n, Some("new")).await, "{}: new refused", n.addr());
        assert!(!accepts(n, Some("old")).await, "{}: old accepted", n.addr());
        assert!(
            !accepts(n, None).await,
            "{}: no password accepted",
            n.addr()
        );
    }
    // Replicas reconnect with the new masterauth (their old links were cut on purpose).
    for n in &nodes {
        let mut c = open(&url(n, Some("new"))).await.expect("connect");
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("master")
            .query_async(&mut c)
            .await
            .expect("CLIENT KILL TYPE master");
    }
    replicas_linked(&nodes, Some("new")).await;
    let new_opts = EngineOptions {
        password: Some("new".into()),
        ..test_opts()
    };
    let report = reconcile(&desired, &pods, &new_opts).await.expect("engine");
    assert!(report.converged, "{report:?}");
    {
        let client = cluster_builder(vec![url(&nodes[0], Some("new"))])
            .build()
            .expect("client");
        let conn = client.get_async_connection().await.expect("connect");
        assert_eq!(missing_keys(&conn, 0..KEYS).await, 0);
    }

    // Removing the password: back to no AUTH everywhere.
    let changed = auth::switch(&pods, &test_opts(), None, Some("new"))
        .await
        .expect("switch to none");
    assert_eq!(changed, 4);
    for n in &nodes {
        assert!(
            accepts(n, None).await,
            "{}: still wants a password",
            n.addr()
        );
    }
    replicas_linked(&nodes, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_switch_on_redis() {
    scenario(tessera_testkit::redis_bin()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_switch_on_tessera_node() {
    // The kit fails (naming `cargo build -p tessera-node`) when the binary is missing.
    scenario(tessera_testkit::tessera_bin()).await;
}

/// Nodes started from the node-auth file (the operator's user, `masteruser` as it, and
/// `requirepass`): the engine forms the cluster and migrates logged in as the operator's user,
/// and a password switch changes `requirepass` only; `masterauth` stays the operator's
/// password, so replicas re-link as that user whatever the default user's password is.
async fn scenario_with_operator_user(bin: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let conf = tmp.path().join("auth.conf");
    let logins = tessera_operator::children::auth::NodeLogins {
        admin_password: "adm",
        requirepass: Some("old"),
    };
    std::fs::write(
        &conf,
        tessera_operator::children::auth::auth_conf(logins, None),
    )
    .expect("auth.conf");
    let include = conf.to_str().expect("utf-8 path");
    let nodes = start_nodes(bin, tmp.path(), 4, &["--include", include]).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let pods = endpoints(&refs, 2);
    let admin = Some(tessera_topology::AdminLogin {
        user: "tessera-operator".into(),
        password: "adm".into(),
    });
    // The default user's password is wrong on purpose: only the operator's user gets in.
    let opts = EngineOptions {
        admin: admin.clone(),
        password: Some("wrong".into()),
        ..test_opts()
    };
    converge(2, 1, &pods, &opts, LIMIT).await;
    {
        let client = cluster_builder(vec![url(&nodes[0], Some("old"))])
            .build()
            .expect("client");
        let conn = client.get_async_connection().await.expect("connect");
        load_keys(&conn, 0..KEYS).await;
    }
    replicas_linked(&nodes, Some("old")).await;

    let changed = auth::switch(&pods, &opts, Some("new"), Some("old"))
        .await
        .expect("switch");
    assert_eq!(changed, 4);
    for n in &nodes {
        assert!(accepts(n, Some("new")).await, "{}: new refused", n.addr());
        assert!(!accepts(n, Some("old")).await, "{}: old accepted", n.addr());
        let mut c = open(&url(n, Some("new"))).await.expect("connect");
        let auth: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("masterauth")
            .query_async(&mut c)
            .await
            .expect("CONFIG GET");
        assert_eq!(auth[1], "adm", "{}: masterauth left alone", n.addr());
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("master")
            .query_async(&mut c)
            .await
            .expect("CLIENT KILL TYPE master");
    }
    replicas_linked(&nodes, Some("new")).await;
    // In sync: nothing to change (read back by CONFIG GET requirepass).
    let changed = auth::switch(&pods, &opts, Some("new"), Some("new"))
        .await
        .expect("switch again");
    assert_eq!(changed, 0);
    let client = cluster_builder(vec![url(&nodes[0], Some("new"))])
        .build()
        .expect("client");
    let conn = client.get_async_connection().await.expect("connect");
    assert_eq!(missing_keys(&conn, 0..KEYS).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_user_switch_on_redis() {
    scenario_with_operator_user(tessera_testkit::redis_bin()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_user_switch_on_tessera_node() {
    scenario_with_operator_user(tessera_testkit::tessera_bin()).await;
}
