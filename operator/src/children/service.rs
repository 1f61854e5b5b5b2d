//! The headless Service (stable pod DNS, including not-ready pods so nodes can find each
//! other while forming) and the client Service.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::{
    child_meta, cluster_labels, headless_name, ChildError, BUS_PORT, CLIENT_PORT, LABEL_CLUSTER,
};
use crate::crd::RedisCluster;

fn port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    }
}

/// The client port's name: `tls` when it serves TLS only (spec.tls), so a Service reader sees
/// what to speak.
fn client_port(rc: &RedisCluster) -> ServicePort {
    port(
        if rc.spec.tls.is_some() {
            "tls"
        } else {
            "client"
        },
        CLIENT_PORT,
    )
}

fn selector(name: &str) -> std::collections::BTreeMap<String, String> {
    std::collections::BTreeMap::from([(LABEL_CLUSTER.to_string(), name.to_string())])
}

/// `<name>-nodes`: headless, publishes not-ready addresses, client and bus ports.
pub fn headless(rc: &RedisCluster) -> Result<Service, ChildError> {
    let name = rc.name_any();
    Ok(Service {
        metadata: child_meta(rc, headless_name(&name), cluster_labels(&name))?,
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector(&name)),
            ports: Some(vec![client_port(rc), port("bus", BUS_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

/// `<name>`: the address clients bootstrap from (any ready node; cluster-aware clients then
/// follow MOVED redirections to pod IPs).
pub fn client(rc: &RedisCluster) -> Result<Service, ChildError> {
    let name = rc.name_any();
    let svc = rc.spec.service.clone().unwrap_or_default();
    let mut meta = child_meta(rc, name.clone(), cluster_labels(&name))?;
    if !svc.annotations.is_empty() {
        meta.annotations = Some(svc.annotations.clone());
    }
    Ok(Service {
        metadata: meta,
        spec: Some(ServiceSpec {
            type_: Some(svc.type_.as_str().into()),
            selector: Some(selector(&name)),
            ports: Some(vec![client_port(rc)]),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}
