//! Connections to single cluster nodes (not cluster-aware: the engine addresses nodes directly).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, ClientTlsConfig, ConnectionAddr, IntoConnectionInfo,
    TlsCertificates, Value,
};

use super::{EngineOptions, TopologyError};

/// A connection to one node, remembering its address for error messages.
#[derive(Clone)]
pub struct NodeConn {
    pub addr: String,
    pub conn: MultiplexedConnection,
}

/// Who a connection logged in as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// The operator's ACL user ([`EngineOptions::admin`]).
    Admin,
    /// The default user with this password (None: no AUTH).
    Default(Option<String>),
}

/// The logins to try, in order (pure): the operator's user first, then the default user's
/// password and each fallback password, without repeats.
pub fn login_order(opts: &EngineOptions) -> Vec<Login> {
    let mut out = Vec::new();
    if opts.admin.is_some() {
        out.push(Login::Admin);
    }
    for pw in std::iter::once(&opts.password).chain(&opts.fallback_passwords) {
        let l = Login::Default(pw.clone());
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// Open a multiplexed connection to `host:port`, logging in as the operator's user when one
/// is set, else (a node started without it) with the default user's password, then each
/// fallback password while the node refuses. `reply_timeout` bounds every command.
pub async fn connect(
    host: &str,
    port: u16,
    opts: &EngineOptions,
    reply_timeout: Duration,
) -> Result<NodeConn, TopologyError> {
    Ok(connect_with(host, port, opts, reply_timeout).await?.0)
}

/// [`connect`], also returning how the node accepted the connection.
pub async fn connect_with(
    host: &str,
    port: u16,
    opts: &EngineOptions,
    reply_timeout: Duration,
) -> Result<(NodeConn, Login), TopologyError> {
    let order = login_order(opts);
    let mut last = None;
    for (i, login) in order.iter().enumerate() {
        let (user, pw) = match login {
            Login::Admin => match &opts.admin {
                Some(a) => (Some(a.user.as_str()), Some(a.password.as_str())),
                None => continue,
            },
            Login::Default(pw) => (None, pw.as_deref()),
        };
        let mut c = match connect_as(host, port, user, pw, opts, reply_timeout).await {
            Ok(c) => c,
            Err(e) if e.is_auth() => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        // Without AUTH the connection opens even when the node wants a password; only a
        // command tells. Checked only when there is another login to try.
        if pw.is_none() && i + 1 < order.len() {
            match c.run::<Value>(&redis::cmd("PING")).await {
                Ok(_) => {}
                Err(e) if e.is_auth() => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        return Ok((c, login.clone()));
    }
    Err(last
        .unwrap_or_else(|| TopologyError::Protocol(format!("{host}:{port}: no password to try"))))
}

async fn connect_as(
    host: &str,
    port: u16,
    user: Option<&str>,
    password: Option<&str>,
    opts: &EngineOptions,
    reply_timeout: Duration,
) -> Result<NodeConn, TopologyError> {
    let addr = format!("{host}:{port}");
    let err = |source| TopologyError::Redis {
        node: addr.clone(),
        source,
    };
    let addr_kind = match &opts.tls {
        None => ConnectionAddr::Tcp(host.to_string(), port),
        Some(_) => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: false,
            tls_params: None,
        },
    };
    let info = addr_kind.into_connection_info().map_err(err)?;
    // CLIENT SETINFO is skipped: it is noise for the nodes and not every node implements it.
    let mut redis = info.redis_settings().clone().set_skip_set_lib_name();
    if let Some(u) = user {
        redis = redis.set_username(u);
    }
    if let Some(pw) = password {
        redis = redis.set_password(pw);
    }
    let info = info.set_redis_settings(redis);
    let client = match &opts.tls {
        None => Client::open(info).map_err(err)?,
        Some(tls) => {
            let certs = TlsCertificates {
                client_tls: Some(ClientTlsConfig {
                    client_cert: tls.cert_pem.clone(),
                    client_key: tls.key_pem.clone(),
                }),
                root_cert: Some(tls.ca_pem.clone()),
            };
            let built = Client::build_with_tls(info, certs).map_err(err)?;
            // The CA is checked, the name is not: nodes are reached by pod IP (crate::tls).
            let mut addr = built.get_connection_info().addr().clone();
            addr.set_danger_accept_invalid_hostnames(true);
            let info = built.get_connection_info().clone().set_addr(addr);
            Client::open(info).map_err(err)?
        }
    };
    let cfg = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(opts.connect_timeout))
        .set_response_timeout(Some(reply_timeout));
    let conn = client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .map_err(err)?;
    Ok(NodeConn { addr, conn })
}

impl NodeConn {
    /// Run one command and convert its reply.
    pub async fn run<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
    ) -> Result<T, TopologyError> {
        cmd.query_async(&mut self.conn)
            .await
            .map_err(|source| TopologyError::Redis {
                node: self.addr.clone(),
                source,
            })
    }

    /// Run one command whose reply is a simple/bulk string (CLUSTER NODES, INFO...).
    pub async fn text(&mut self, cmd: &redis::Cmd) -> Result<String, TopologyError> {
        let v: Value = self.run(cmd).await?;
        value_text(&v).ok_or_else(|| TopologyError::Protocol(format!("{}: not text", self.addr)))
    }
}

/// Text of a string-like reply (RESP2 bulk/status or RESP3 verbatim).
pub fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Okay => Some("OK".to_string()),
        _ => None,
    }
}

/// Build a `CLUSTER <sub> args...` command.
pub fn cluster(sub: &str) -> redis::Cmd {
    let mut c = redis::cmd("CLUSTER");
    c.arg(sub);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AdminLogin;

    #[test]
    fn the_operator_user_is_tried_first_then_the_default_passwords() {
        let d = |p: Option<&str>| Login::Default(p.map(str::to_string));
        let mut o = EngineOptions {
            password: Some("new".into()),
            fallback_passwords: vec![Some("old".into()), None, Some("new".into())],
            ..EngineOptions::default()
        };
        assert_eq!(
            login_order(&o),
            vec![d(Some("new")), d(Some("old")), d(None)]
        );
        o.admin = Some(AdminLogin {
            user: "tessera-operator".into(),
            password: "x".into(),
        });
        assert_eq!(
            login_order(&o),
            vec![Login::Admin, d(Some("new")), d(Some("old")), d(None)]
        );
        let plain = EngineOptions {
            admin: o.admin.clone(),
            ..EngineOptions::default()
        };
        assert_eq!(login_order(&plain), vec![Login::Admin, d(None)]);
    }
}
