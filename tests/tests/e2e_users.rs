//! End-to-end ACL users (`spec.users`): a RedisCluster on tessera-node pods in kube-in-a-box
//! with the real operator. A user limited to `~app:*` writes its keys through the cluster
//! client and gets NOPERM elsewhere; a changed password Secret is rotated with an overlap
//! window while a writer runs as that user (no write lost, none failed); a replaced pod gets
//! the user back; a user removed from the spec is deleted from every node while a hand-made
//! one stays. With `default` declared `off` and the operator's own user, the cluster keeps
//! working: a master pod replaced re-syncs through `masteruser`, and a scale-out migrates
//! slots with the operator's login.

mod e2e_common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_tests::kiab::testkit::{pods, wait_for};

use e2e_common::*;

const NAME: &str = "acl";
/// A cluster client also needs CLUSTER SLOTS (its topology); the rest is the example.
const RULES: &str = "~app:* +@read +@write -@dangerous +cluster|slots";

fn secret(password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-pw\nstringData:\n  password: {password}\n"
    )
}

fn users(with_app: bool) -> String {
    let mut s = String::from("  userPasswordOverlapSeconds: 20\n");
    if with_app {
        s.push_str(&format!(
            "  users:\n  - name: app\n    passwordSecret:\n      name: app-pw\n    rules: \"{RULES}\"\n"
        ));
    }
    s
}

/// A cluster connection logged in as `user` with `password`.
async fn user_cluster(
    ips: &[String],
    user: &str,
    password: &str,
) -> Result<redis::cluster_async::ClusterConnection, String> {
    let nodes: Vec<String> = ips
        .iter()
        .map(|ip| format!("redis://{user}:{password}@{ip}:6379/"))
        .collect();
    let client = redis::cluster::ClusterClient::builder(nodes)
        .retries(6)
        .connection_timeout(Duration::from_secs(3))
        .response_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(15), client.get_async_connection())
        .await
        .map_err(|_| "cluster connection timed out".to_string())?
        .map_err(|e| e.to_string())
}

/// A connection to one node logged in as `user` (None: the default user, no password).
async fn node_as(
    ip: &str,
    user: Option<(&str, &str)>,
) -> Result<redis::aio::MultiplexedConnection, String> {
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    let auth = user.map(|(u, p)| format!("{u}:{p}@")).unwrap_or_default();
    redis::Client::open(format!("redis://{auth}{ip}:6379/"))
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .map_err(|e| format!("{ip}: {e}"))
}

async fn acl_list(ip: &str) -> Result<Vec<String>, String> {
    let mut c = node_as(ip, None).await?;
    redis::cmd("ACL")
        .arg("LIST")
        .query_async(&mut c)
        .await
        .map_err(|e| format!("{ip}: {e}"))
}

/// Every pod of the cluster: `app` present (or absent) in ACL LIST; with `password`, it logs
/// in with it.
async fn every_node(env: &Env, present: bool, password: Option<&str>) -> Result<(), String> {
    let ips = pod_ips(&env.client, NAME).await;
    if ips.len() != 4 {
        return Err(format!("{} pods", ips.len()));
    }
    for ip in &ips {
        let list = acl_list(ip).await?;
        let has = list.iter().any(|l| l.starts_with("user app "));
        if has != present {
            return Err(format!("{ip}: app present={has}: {list:?}"));
        }
        if let Some(pw) = password {
            node_as(ip, Some(("app", pw))).await?;
        }
    }
    Ok(())
}

async fn status(env: &Env) -> Value {
    status_of(env, NAME).await
}

/// Waits for cluster `name`'s UsersReady condition to be True/Applied: the status trails
/// the nodes by a reconcile.
async fn wait_users_applied(env: &mut Env, name: &str) {
    let r = wait_for("UsersReady True Applied", WAIT, || async {
        let st = status_of(env, name).await;
        match condition(&st, "UsersReady") {
            Some((s, r)) if s == "True" && r == "Applied" => Ok(()),
            _ => Err(format!("status {st}")),
        }
    })
    .await;
    if let Err(e) = r {
        panic!("{e}\n{}", env.operator_state());
    }
}

async fn status_of(env: &Env, name: &str) -> Value {
    env.rcl()
        .get(name)
        .await
        .ok()
        .and_then(|o| o.data.get("status").cloned())
        .unwrap_or(Value::Null)
}

fn condition(st: &Value, type_: &str) -> Option<(String, String)> {
    st["conditions"].as_array()?.iter().find_map(|c| {
        (c["type"] == type_).then(|| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
    })
}

/// Writes `app:w:<i>` as user `app` until stopped, with the password in `password`: when it
/// changes the writer reconnects with it (as a client re-reading its mounted Secret). Every
/// failed write is counted.
struct Writer {
    acked: Arc<Mutex<Vec<String>>>,
    failed: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    password: Arc<Mutex<String>>,
    handle: tokio::task::JoinHandle<()>,
}

impl Writer {
    async fn start(ips: Vec<String>, password: &str) -> Writer {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let failed = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let pw = Arc::new(Mutex::new(password.to_string()));
        let mut conn = user_cluster(&ips, "app", password)
            .await
            .expect("writer connection");
        let (a, f, fm, s, p) = (
            acked.clone(),
            failed.clone(),
            failures.clone(),
            stop.clone(),
            pw.clone(),
        );
        let handle = tokio::spawn(async move {
            let mut using = p.lock().expect("lock").clone();
            let mut i = 0u64;
            while !s.load(Ordering::SeqCst) {
                let want = p.lock().expect("lock").clone();
                if want != using {
                    match user_cluster(&ips, "app", &want).await {
                        Ok(c) => {
                            conn = c;
                            using = want;
                        }
                        Err(e) => {
                            f.fetch_add(1, Ordering::SeqCst);
                            fm.lock().expect("lock").push(format!("reconnect: {e}"));
                        }
                    }
                }
                let k = format!("app:w:{i}");
                let r: Result<(), String> = tokio::time::timeout(
                    Duration::from_secs(10),
                    redis::cmd("SET").arg(&k).arg(i).query_async(&mut conn),
                )
                .await
                .map_err(|_| "timeout".to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
                match r {
                    Ok(()) => a.lock().expect("lock").push(k),
                    Err(e) => {
                        f.fetch_add(1, Ordering::SeqCst);
                        let mut m = fm.lock().expect("lock");
                        if m.len() < 5 {
                            m.push(format!("SET {k}: {e}"));
                        }
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        Writer {
            acked,
            failed,
            failures,
            stop,
            password: pw,
            handle,
        }
    }

    fn acked(&self) -> usize {
        self.acked.lock().expect("lock").len()
    }
}

#[test]
fn users_are_kept_on_every_node_and_rotated_without_failed_writes() {
    serial(async {
        let mut env = Env::start("127.0.51.1", true).await;
        env.apply(&secret("first-pass")).await;
        // A bad rule first: a condition naming the user and the rule, nothing sent.
        let bad = users(true).replace("-@dangerous", "-@dangerous +@nosuch");
        env.apply(&manifest(NAME, 2, 1, &bad)).await;
        env.wait_ready(NAME, 2, 4, WAIT).await;
        let r = wait_for("UsersReady False InvalidUserRules", WAIT, || async {
            let st = status(&env).await;
            let msg = st["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "UsersReady"))
                .map(|c| c["message"].to_string())
                .unwrap_or_default();
            match condition(&st, "UsersReady") {
                Some((s, r))
                    if s == "False"
                        && r == "InvalidUserRules"
                        && msg.contains("+@nosuch")
                        && msg.contains("app") =>
                {
                    Ok(())
                }
                _ => Err(format!("status {st}")),
            }
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        every_node(&env, false, None)
            .await
            .expect("no user applied from a spec with a bad rule");
        assert!(status(&env).await.get("users").is_none());

        env.apply(&manifest(NAME, 2, 1, &users(true))).await;
        let r = wait_for("app on every node", WAIT, || {
            every_node(&env, true, Some("first-pass"))
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        // The nodes have the user before the operator records it: wait for the status.
        wait_users_applied(&mut env, NAME).await;
        let st = status(&env).await;
        assert_eq!(st["users"][0]["name"], "app", "{st}");
        assert!(
            !st.to_string().contains("first-pass"),
            "the record keeps hashes only: {st}"
        );

        // The user writes its keys through the cluster client, and nothing else.
        let ips = pod_ips(&env.client, NAME).await;
        let mut c = user_cluster(&ips, "app", "first-pass")
            .await
            .expect("app connection");
        for i in 0..200 {
            let _: () = redis::cmd("SET")
                .arg(format!("app:{i}"))
                .arg(i)
                .query_async(&mut c)
                .await
                .expect("SET app:*");
        }
        for args in [
            &["SET", "other:1", "v"][..],
            &["GET", "other:2"],
            &["SET", "{app:1}x", "v"],
        ] {
            let mut cmd = redis::cmd(args[0]);
            cmd.arg(&args[1..]);
            let r: Result<redis::Value, _> = cmd.query_async(&mut c).await;
            let e = r.expect_err(&format!("{args:?} must be refused"));
            assert!(
                e.to_string().to_lowercase().contains("noperm"),
                "{args:?}: {e}"
            );
        }
        let r: Result<redis::Value, _> = redis::cmd("FLUSHALL").query_async(&mut c).await;
        assert!(
            r.is_err_and(|e| e.to_string().to_lowercase().contains("noperm")),
            "-@dangerous"
        );

        // A hand-made user on every node: the operator must leave it alone.
        for ip in &ips {
            let mut d = node_as(ip, None).await.expect("node");
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg("manual")
                .arg("on")
                .arg(">m")
                .arg("~*")
                .arg("+get")
                .query_async(&mut d)
                .await
                .expect("ACL SETUSER manual");
        }

        // Rotation with a writer running as app.
        let writer = Writer::start(ips.clone(), "first-pass").await;
        let t0 = Instant::now();
        env.apply(&secret("second-pass")).await;
        let r = wait_for(
            "both passwords on every node (overlap started)",
            Duration::from_secs(120),
            || async {
                let st = status(&env).await;
                if st["users"][0]["overlapSince"].is_string()
                    && condition(&st, "UsersRotating").is_some_and(|(s, _)| s == "True")
                {
                    Ok(())
                } else {
                    Err(format!("status {st}"))
                }
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        for ip in &ips {
            node_as(ip, Some(("app", "first-pass")))
                .await
                .expect("old password during the overlap");
            node_as(ip, Some(("app", "second-pass")))
                .await
                .expect("new password during the overlap");
        }
        // The client moves to the new password within the window.
        *writer.password.lock().expect("lock") = "second-pass".into();
        let r = wait_for(
            "the old password removed from every node",
            Duration::from_secs(120),
            || async {
                for ip in &ips {
                    if node_as(ip, Some(("app", "first-pass"))).await.is_ok() {
                        return Err(format!("{ip}: still accepts the old password"));
                    }
                    node_as(ip, Some(("app", "second-pass"))).await?;
                }
                let st = status(&env).await;
                match condition(&st, "UsersRotating") {
                    Some((s, _)) if s == "False" => Ok(()),
                    _ => Err(format!("status {st}")),
                }
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ready = t0.elapsed();
        let before = writer.acked();
        wait_for("the writer goes on", Duration::from_secs(60), || async {
            if writer.acked() >= before + 100 {
                Ok(())
            } else {
                Err("fewer than 100 writes since".to_string())
            }
        })
        .await
        .expect("writer");
        writer.stop.store(true, Ordering::SeqCst);
        let _ = writer.handle.await;
        let acked = writer.acked.lock().expect("lock").clone();
        let mut c = user_cluster(&ips, "app", "second-pass")
            .await
            .expect("app connection");
        let mut lost = 0;
        for k in acked.iter().map(String::as_str).chain(["app:0", "app:199"]) {
            let v: Option<String> = redis::cmd("GET")
                .arg(k)
                .query_async(&mut c)
                .await
                .expect("GET");
            lost += usize::from(v.is_none());
        }
        let tally = WriteTally {
            acked: acked.len(),
            failed: writer.failed.load(Ordering::SeqCst),
            failures: writer.failures.lock().expect("lock").clone(),
        };
        report_scenario("user password rotation", ready, &tally);
        assert_eq!(lost, 0, "acknowledged writes lost");
        assert_eq!(tally.failed, 0, "{tally}");
        assert!(tally.acked >= 100, "{tally}");
        let events = env.kubectl.ok(&["get", "events", "-o", "json"]).await;
        assert!(events.contains("UsersUpdated"), "no UsersUpdated event");

        // A replaced pod gets the user back.
        let old_uid = pods(
            &env.client,
            "default",
            &format!("tessera.rs/cluster={NAME}"),
        )
        .await
        .expect("pods")
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some("acl-1-1"))
        .and_then(|p| p.metadata.uid);
        env.kubectl.ok(&["delete", "pod", "acl-1-1"]).await;
        let client = env.client.clone();
        wait_for("acl-1-1 replaced", WAIT, || async {
            let ps = pods(&client, "default", &format!("tessera.rs/cluster={NAME}")).await?;
            match ps
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some("acl-1-1"))
            {
                Some(p) if p.metadata.uid != old_uid => Ok(()),
                _ => Err("not replaced yet".to_string()),
            }
        })
        .await
        .expect("pod replaced");
        let r = wait_for("app on every node again", WAIT, || {
            every_node(&env, true, Some("second-pass"))
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }

        // Removed from the spec: deleted everywhere; the hand-made user stays where it was.
        env.apply(&manifest(NAME, 2, 1, &users(false))).await;
        let r = wait_for("app deleted from every node", WAIT, || {
            every_node(&env, false, None)
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ips = pod_ips(&env.client, NAME).await;
        let mut kept = 0;
        for ip in &ips {
            let list = acl_list(ip).await.expect("ACL LIST");
            kept += usize::from(list.iter().any(|l| l.starts_with("user manual ")));
        }
        assert_eq!(kept, 3, "manual kept on the 3 pods that were not replaced");
        // The operator's own user stays (it is not in the record): UsersReady stays True.
        let r = wait_for("the record emptied", Duration::from_secs(60), || async {
            let st = status(&env).await;
            let ready = condition(&st, "UsersReady").is_some_and(|(s, _)| s == "True");
            if st.get("users").is_none() && ready {
                Ok(())
            } else {
                Err(format!("status {st}"))
            }
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        env.stop().await;
    });
}

/// The same users on a reference server image: applied by the standard commands, enforced
/// by the server, and once in sync a reconcile sends nothing (the planner reads the server's
/// own ACL LIST form as equal to the spec).
async fn users_on_image(image: &str, ip_base: &str) {
    let mut env = Env::start(ip_base, true).await;
    env.apply(&secret("ref-pass")).await;
    env.apply(&manifest_on(Some(image), NAME, 1, 1, &users(true)))
        .await;
    env.wait_ready(NAME, 1, 2, WAIT).await;
    let r = wait_for("in sync: a reconcile sends nothing", WAIT, || async {
        let ips = pod_ips(&env.client, NAME).await;
        for ip in &ips {
            node_as(ip, Some(("app", "ref-pass"))).await?;
        }
        let st = status(&env).await;
        let msg = st["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "UsersReady"))
            .map(|c| c["message"].to_string())
            .unwrap_or_default();
        if ips.len() == 2 && msg.contains("on 2 nodes (0 commands sent)") {
            Ok(())
        } else {
            Err(format!("status {st}"))
        }
    })
    .await;
    if let Err(e) = r {
        panic!("{image}: {e}\n{}", env.operator_state());
    }
    let ips = pod_ips(&env.client, NAME).await;
    let mut c = user_cluster(&ips, "app", "ref-pass")
        .await
        .expect("app connection");
    let _: () = redis::cmd("SET")
        .arg("app:1")
        .arg("v")
        .query_async(&mut c)
        .await
        .expect("SET app:1");
    let r: Result<redis::Value, _> = redis::cmd("SET")
        .arg("other:1")
        .arg("v")
        .query_async(&mut c)
        .await;
    assert!(
        r.is_err_and(|e| e.to_string().to_lowercase().contains("noperm")),
        "{image}: other:1 must be refused"
    );
    eprintln!("{image}: users applied, enforced, in sync");
    env.stop().await;
}

#[test]
fn users_work_on_redis_and_valkey_images() {
    serial(async {
        users_on_image(REDIS_IMAGE, "127.0.53.1").await;
        users_on_image(VALKEY_IMAGE, "127.0.54.1").await;
    });
}

const OFF: &str = "dflt";
const ADMIN: &str = "tessera-operator";

fn node_secret(password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: node-pw\nstringData:\n  password: {password}\n"
    )
}

/// spec.auth plus spec.users [app, default `off`].
fn default_off() -> String {
    format!(
        "  auth:\n    secretName: node-pw\n  users:\n  - name: app\n    passwordSecret:\n      name: app-pw\n    rules: \"{RULES}\"\n  - name: default\n    rules: \"off\"\n"
    )
}

/// INFO replication of one node, logged in as the operator's user.
async fn admin_info(ip: &str, admin: &str) -> Result<String, String> {
    let mut c = node_as(ip, Some((ADMIN, admin))).await?;
    redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut c)
        .await
        .map_err(|e| format!("{ip}: {e}"))
}

fn field(info: &str, k: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{k}:")))
        .map(|v| v.trim().to_string())
}

/// Every pod (`n` of them): `default` refused with spec.auth's password and listed `off`, the
/// operator's user accepted, cluster_state ok with every slot, replicas linked.
async fn default_off_everywhere(
    env: &Env,
    n: usize,
    node_pw: &str,
    admin: &str,
) -> Result<(), String> {
    let ips = pod_ips(&env.client, OFF).await;
    if ips.len() != n {
        return Err(format!("{} pods, want {n}", ips.len()));
    }
    for ip in &ips {
        if node_as(ip, Some(("default", node_pw))).await.is_ok() {
            return Err(format!("{ip}: AUTH as default accepted"));
        }
        let mut c = node_as(ip, Some((ADMIN, admin))).await?;
        let list: Vec<String> = redis::cmd("ACL")
            .arg("LIST")
            .query_async(&mut c)
            .await
            .map_err(|e| format!("{ip}: {e}"))?;
        if !list.iter().any(|l| l.starts_with("user default off ")) {
            return Err(format!("{ip}: default not off: {list:?}"));
        }
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut c)
            .await
            .map_err(|e| format!("{ip}: {e}"))?;
        if !info.contains("cluster_state:ok") || !info.contains("cluster_slots_assigned:16384") {
            return Err(format!("{ip}: cluster not ok"));
        }
        let repl = admin_info(ip, admin).await?;
        if field(&repl, "role").as_deref() == Some("slave")
            && field(&repl, "master_link_status").as_deref() != Some("up")
        {
            return Err(format!("{ip}: replica link down"));
        }
    }
    Ok(())
}

/// The RedisCluster reports Ready with `shards` shards at its generation.
async fn off_ready(env: &Env, shards: u64) -> Result<(), String> {
    let o = env.rcl().get(OFF).await.map_err(|e| e.to_string())?;
    let st = o.data.get("status").cloned().unwrap_or(Value::Null);
    if st["phase"] == "Ready"
        && st["observedGeneration"].as_i64() == o.metadata.generation
        && st["shards"].as_u64() == Some(shards)
        && st["slotsAssigned"].as_u64() == Some(16384)
    {
        Ok(())
    } else {
        Err(format!("status {st}"))
    }
}

/// tessera-node pods. Its replicas apply their master's stream with no ACL check, as
/// Redis's master client (d54c621; before, with `default` off every replicated write was
/// refused with NOPERM and a failover lost the writes).
#[test]
fn default_off_with_the_operators_own_user() {
    serial(default_off_scenario(None, "127.0.56.1", "tessera-node"));
}

/// The same on redis:7.0 pods (redis-server applies the stream as its master client, with no
/// ACL check).
#[test]
fn default_off_with_the_operators_own_user_on_redis() {
    serial(default_off_scenario(
        Some(REDIS_IMAGE),
        "127.0.57.1",
        "redis:7.0",
    ));
}

async fn default_off_scenario(image: Option<&str>, ip_base: &str, label: &str) {
    {
        let mut env = Env::start(ip_base, true).await;
        env.apply(&secret("app-pass")).await;
        env.apply(&node_secret("node-pass")).await;
        let t0 = Instant::now();
        env.apply(&manifest_on(image, OFF, 3, 1, &default_off()))
            .await;
        let client = env.client.clone();
        let admin_secret = format!("{OFF}-operator-admin");
        let admin = wait_for("the operator's password Secret", WAIT, || {
            secret_password(&client, &admin_secret)
        })
        .await
        .expect("operator Secret");
        assert_eq!(admin.len(), 64, "32 random bytes, hex");
        let r = wait_for("Ready with default off on every node", WAIT, || async {
            off_ready(&env, 3).await?;
            default_off_everywhere(&env, 6, "node-pass", &admin).await
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ready = t0.elapsed();
        // The status may trail the nodes by a reconcile.
        wait_users_applied(&mut env, OFF).await;
        let st = status_of(&env, OFF).await;
        assert!(
            !st.to_string().contains(&admin),
            "no password in the status"
        );

        // The app user writes through the cluster client while a master pod is replaced and
        // while the cluster grows from 3 to 4 shards.
        let ips = pod_ips(&env.client, OFF).await;
        let writer = Writer::start(ips.clone(), "app-pass").await;
        let mut master = None;
        for p in pods(&env.client, "default", &format!("tessera.rs/cluster={OFF}"))
            .await
            .expect("pods")
        {
            let ip = tessera_tests::kiab::testkit::pod_ip(&p).unwrap_or_default();
            let info = admin_info(&ip, &admin).await.expect("INFO");
            if field(&info, "role").as_deref() == Some("master") {
                master = Some((p.metadata.name.clone().unwrap_or_default(), p.metadata.uid));
                break;
            }
        }
        let (victim, old_uid) = master.expect("a master pod");
        let at_delete = writer.acked();
        env.kubectl.ok(&["delete", "pod", &victim]).await;
        let r = wait_for(
            "the master pod back, a replica in sync through masteruser",
            WAIT,
            || async {
                let ps = pods(&client, "default", &format!("tessera.rs/cluster={OFF}")).await?;
                let p = ps
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(victim.as_str()))
                    .ok_or("not recreated yet")?;
                if p.metadata.uid == old_uid {
                    return Err("not replaced yet".to_string());
                }
                let ip = tessera_tests::kiab::testkit::pod_ip(p).ok_or("no ip")?;
                let info = admin_info(&ip, &admin).await?;
                if field(&info, "role").as_deref() != Some("slave")
                    || field(&info, "master_link_status").as_deref() != Some("up")
                {
                    return Err(format!(
                        "{victim}: role {:?} link {:?}",
                        field(&info, "role"),
                        field(&info, "master_link_status")
                    ));
                }
                let mut c = node_as(&ip, Some((ADMIN, &admin))).await?;
                let mu: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("masteruser")
                    .query_async(&mut c)
                    .await
                    .map_err(|e| e.to_string())?;
                if mu.get(1).map(String::as_str) != Some(ADMIN) {
                    return Err(format!("{victim}: masteruser {mu:?}"));
                }
                off_ready(&env, 3).await?;
                default_off_everywhere(&env, 6, "node-pass", &admin).await
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        eprintln!("{victim} replaced: a replica linked as {ADMIN}, default off");
        let at_back = writer.acked();

        env.apply(&manifest_on(image, OFF, 4, 1, &default_off()))
            .await;
        let r = wait_for("4 shards, default off on every node", WAIT, || async {
            off_ready(&env, 4).await?;
            default_off_everywhere(&env, 8, "node-pass", &admin).await
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let before = writer.acked();
        wait_for("the writer goes on", Duration::from_secs(60), || async {
            if writer.acked() >= before + 100 {
                Ok(())
            } else {
                Err("fewer than 100 writes since".to_string())
            }
        })
        .await
        .expect("writer");
        writer.stop.store(true, Ordering::SeqCst);
        let _ = writer.handle.await;
        let acked = writer.acked.lock().expect("lock").clone();
        let ips = pod_ips(&env.client, OFF).await;
        let mut c = user_cluster(&ips, "app", "app-pass")
            .await
            .expect("app connection");
        let mut lost_keys = Vec::new();
        for k in &acked {
            let v: Option<String> = redis::cmd("GET")
                .arg(k)
                .query_async(&mut c)
                .await
                .expect("GET");
            if v.is_none() {
                lost_keys.push(k.clone());
            }
        }
        let lost = lost_keys.len();
        let tally = WriteTally {
            acked: acked.len(),
            failed: writer.failed.load(Ordering::SeqCst),
            failures: writer.failures.lock().expect("lock").clone(),
        };
        eprintln!(
            "default off: {tally}; {lost} lost: {:?}; writes before the pod delete: {at_delete}, after it came back: {at_back}",
            &lost_keys[..lost.min(20)]
        );
        report_scenario(
            &format!("default off, operator user ({label}): master pod replaced, 3 -> 4 shards"),
            ready,
            &tally,
        );
        assert_eq!(lost, 0, "acknowledged writes lost");
        assert!(tally.acked >= 100, "{tally}");
        env.stop().await;
    }
}
