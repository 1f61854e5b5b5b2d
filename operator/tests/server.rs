//! /metrics, /healthz and /readyz over real TCP on loopback.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tessera_operator::metrics::{ErrorCategory, Metrics};
use tessera_operator::server::{bind, Health};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_string(&mut out))
        .await
        .expect("response in time")
        .unwrap();
    out
}

#[tokio::test]
async fn endpoints_serve_metrics_and_health() {
    let metrics = Arc::new(Metrics::new());
    metrics.reconciled(None, Duration::from_millis(12));
    metrics.reconciled(Some(ErrorCategory::KubeApi), Duration::from_millis(3));
    metrics.observe_status(
        "apps",
        "demo",
        &tessera_operator::crd::RedisClusterStatus {
            shards: 3,
            slots_assigned: 16384,
            ready_nodes: 6,
            ..Default::default()
        },
    );
    let health = Arc::new(Health {
        metrics: metrics.clone(),
        ready: Default::default(),
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, fut) = bind("127.0.0.1:0".parse().unwrap(), health.clone(), async {
        let _ = rx.await;
    })
    .await
    .unwrap();
    let server = tokio::spawn(fut);

    assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
    assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
    health.ready.store(true, Ordering::Relaxed);
    assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));

    let body = get(addr, "/metrics").await;
    for want in [
        "tessera_operator_reconciles_total{result=\"success\"} 1",
        "tessera_operator_reconciles_total{result=\"error\"} 1",
        "tessera_operator_reconcile_errors_total{category=\"kube_api\"} 1",
        "tessera_operator_reconcile_duration_seconds_count 2",
        "tessera_operator_cluster_slots_assigned{namespace=\"apps\",name=\"demo\"} 16384",
        "tessera_operator_cluster_shards_ready{namespace=\"apps\",name=\"demo\"} 3",
        "tessera_operator_cluster_ready_nodes{namespace=\"apps\",name=\"demo\"} 6",
    ] {
        assert!(body.contains(want), "{want} missing in\n{body}");
    }
    metrics.forget_cluster("apps", "demo");
    assert!(!get(addr, "/metrics").await.contains("name=\"demo\""));

    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("graceful stop")
        .unwrap()
        .unwrap();
}
