//! End-to-end password change: a RedisCluster with `spec.auth`, on tessera-node pods in
//! kube-in-a-box with the real operator and kubectl. Changing the Secret's content switches
//! every node live (no pod restarted), writes made before and during the change survive, the
//! replicas stay attached, and a pod deleted afterwards comes back with the new password and
//! rejoins.

mod e2e_common;

use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_tests::kiab::testkit::{is_ready, pod_ip, pods, wait_for};

use e2e_common::*;

fn secret(password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pw\nstringData:\n  password: {password}\n"
    )
}

async fn conn(ip: &str, pw: &str) -> Result<redis::aio::MultiplexedConnection, String> {
    node_auth(ip, Some(pw)).await
}

async fn text(ip: &str, pw: &str, args: &[&str]) -> Result<String, String> {
    let mut c = conn(ip, pw).await?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut c)
        .await
        .map_err(|e| format!("{ip}: {e}"))
}

/// All `n` pods Ready, the RedisCluster Ready, and every node answering with `pw`:
/// cluster_state ok and, on replicas, the master link up.
async fn healthy(env: &Env, name: &str, n: usize, pw: &str) -> Result<(), String> {
    let o = env.rcl().get(name).await.map_err(|e| e.to_string())?;
    let st = o.data.get("status").cloned().unwrap_or(Value::Null);
    if st["phase"] != "Ready" {
        return Err(format!("status {st}"));
    }
    let ps = pods(
        &env.client,
        "default",
        &format!("tessera.rs/cluster={name}"),
    )
    .await?;
    let live: Vec<_> = ps
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live.len() != n || !live.iter().all(|p| is_ready(p)) {
        return Err(format!("{} pods, not all ready", live.len()));
    }
    for p in live {
        let ip = pod_ip(p).ok_or("no ip")?;
        let info = text(&ip, pw, &["CLUSTER", "INFO"]).await?;
        if !info.contains("cluster_state:ok") {
            return Err(format!("{ip}: not ok"));
        }
        let repl = text(&ip, pw, &["INFO", "replication"]).await?;
        if repl.contains("role:slave") && !repl.contains("master_link_status:up") {
            return Err(format!("{ip}: replica link down"));
        }
    }
    Ok(())
}

async fn write(ips: &[String], pw: &str, range: std::ops::Range<usize>) {
    let mut c = cluster_conn_auth(ips, Some(pw)).await;
    for i in range {
        let _: () = redis::cmd("SET")
            .arg(format!("auth:{i}"))
            .arg(format!("v{i}"))
            .query_async(&mut c)
            .await
            .expect("SET");
    }
}

async fn missing(ips: &[String], pw: &str, range: std::ops::Range<usize>) -> usize {
    let mut c = cluster_conn_auth(ips, Some(pw)).await;
    let mut bad = 0;
    for i in range {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("auth:{i}"))
            .query_async(&mut c)
            .await
            .expect("GET");
        if v.as_deref() != Some(format!("v{i}").as_str()) {
            bad += 1;
        }
    }
    bad
}

#[test]
fn secret_change_switches_every_node_live() {
    serial(async {
        let mut env = Env::start("127.0.17.1", true).await;
        env.apply(&secret("first-pass")).await;
        env.apply(&manifest("auth", 2, 1, "  auth:\n    secretName: pw\n"))
            .await;
        let r = wait_for("auth cluster Ready", WAIT, || {
            healthy(&env, "auth", 4, "first-pass")
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ips = pod_ips(&env.client, "auth").await;
        let uids: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=auth")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        write(&ips, "first-pass", 0..300).await;
        // A writer through the rotation: it re-reads the password from the Secret when a
        // write fails, as a client mounting the Secret would.
        let checker = DataChecker::start_auth(&env.client, "auth", "pw", "rot", 300).await;

        let t0 = Instant::now();
        env.apply(&secret("second-pass")).await;
        let r = wait_for(
            "every node on the new password only",
            Duration::from_secs(120),
            || async {
                for ip in &ips {
                    text(ip, "second-pass", &["PING"]).await?;
                    if conn(ip, "first-pass").await.is_ok() {
                        return Err(format!("{ip}: still accepts the old password"));
                    }
                }
                Ok(())
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let r = wait_for("healthy on the new password", WAIT, || {
            healthy(&env, "auth", 4, "second-pass")
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ready = t0.elapsed();
        // Connections made before the change stay logged in; drop them, as restarts and
        // timeouts eventually do: the writer must come back on the new password.
        for ip in &ips {
            text(ip, "second-pass", &["CLIENT", "KILL", "TYPE", "normal"])
                .await
                .expect("CLIENT KILL");
        }
        let before = checker.acked.lock().expect("lock").len();
        let r = wait_for(
            "the writer acknowledged on the new password",
            Duration::from_secs(60),
            || async {
                let now = checker.acked.lock().expect("lock").len();
                if now >= before + 100 {
                    Ok(())
                } else {
                    Err(format!("{} writes acknowledged since", now - before))
                }
            },
        )
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        checker
            .stop
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let client = env.client.clone();
        let r = wait_for("replicas linked and in sync", WAIT, || {
            replicas_linked_auth(&client, "auth", 2, 1, Some("second-pass"))
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let tally = checker.verify(&ips).await;
        report_scenario("password rotation", ready, &tally);
        assert!(tally.acked >= 300, "{tally}");
        // Live: the same pods, none restarted.
        let now: Vec<String> = pods(&env.client, "default", "tessera.rs/cluster=auth")
            .await
            .expect("pods")
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        assert_eq!(now, uids, "pods were replaced");
        write(&ips, "second-pass", 300..600).await;
        assert_eq!(missing(&ips, "second-pass", 0..600).await, 0);
        let events = env.kubectl.ok(&["get", "events", "-o", "json"]).await;
        assert!(
            events.contains("PasswordChanged"),
            "no PasswordChanged event: {events}"
        );

        // A pod started after the change reads the new password from the Secret and rejoins.
        env.kubectl.ok(&["delete", "pod", "auth-1-1"]).await;
        let client = env.client.clone();
        wait_for("auth-1-1 replaced", WAIT, || async {
            let ps = pods(&client, "default", "tessera.rs/cluster=auth").await?;
            match ps
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some("auth-1-1"))
            {
                Some(p) if !p.metadata.uid.as_ref().is_some_and(|u| uids.contains(u)) => Ok(()),
                _ => Err("not replaced yet".to_string()),
            }
        })
        .await
        .expect("pod replaced");
        let r = wait_for("healthy after the pod restart", WAIT, || {
            healthy(&env, "auth", 4, "second-pass")
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\n{}", env.operator_state());
        }
        let ips = pod_ips(&env.client, "auth").await;
        assert_eq!(missing(&ips, "second-pass", 0..600).await, 0);
        env.stop().await;
    });
}
