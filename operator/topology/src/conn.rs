//! Connections to single cluster nodes (not cluster-aware: the engine addresses nodes directly).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, Value};

use super::{EngineOptions, TopologyError};

/// A connection to one node, remembering its address for error messages.
#[derive(Clone)]
pub struct NodeConn {
    pub addr: String,
    pub conn: MultiplexedConnection,
}

/// Open a multiplexed connection to `host:port`, authenticating when a password is set (then
/// with each fallback password while the node refuses). `reply_timeout` bounds every command.
pub async fn connect(
    host: &str,
    port: u16,
    opts: &EngineOptions,
    reply_timeout: Duration,
) -> Result<NodeConn, TopologyError> {
    Ok(connect_with(host, port, opts, reply_timeout).await?.0)
}

/// [`connect`], also returning which password the node accepted.
pub async fn connect_with(
    host: &str,
    port: u16,
    opts: &EngineOptions,
    reply_timeout: Duration,
) -> Result<(NodeConn, Option<String>), TopologyError> {
    let mut tried: Vec<&Option<String>> = Vec::new();
    let mut last = None;
    for pw in std::iter::once(&opts.password).chain(&opts.fallback_passwords) {
        if tried.contains(&pw) {
            continue;
        }
        tried.push(pw);
        let mut c = match connect_as(host, port, pw.as_deref(), opts, reply_timeout).await {
            Ok(c) => c,
            Err(e) if e.is_auth() => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        // Without AUTH the connection opens even when the node wants a password; only a
        // command tells. Checked only when there is another password to try.
        if pw.is_none() && !opts.fallback_passwords.is_empty() {
            match c.run::<Value>(&redis::cmd("PING")).await {
                Ok(_) => {}
                Err(e) if e.is_auth() => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        return Ok((c, pw.clone()));
    }
    Err(last
        .unwrap_or_else(|| TopologyError::Protocol(format!("{host}:{port}: no password to try"))))
}

async fn connect_as(
    host: &str,
    port: u16,
    password: Option<&str>,
    opts: &EngineOptions,
    reply_timeout: Duration,
) -> Result<NodeConn, TopologyError> {
    let addr = format!("{host}:{port}");
    let err = |source| TopologyError::Redis {
        node: addr.clone(),
        source,
    };
    let info = ConnectionAddr::Tcp(host.to_string(), port)
        .into_connection_info()
        .map_err(err)?;
    // CLIENT SETINFO is skipped: it is noise for the nodes and not every node implements it.
    let mut redis = info.redis_settings().clone().set_skip_set_lib_name();
    if let Some(pw) = password {
        redis = redis.set_password(pw);
    }
    let info = info.set_redis_settings(redis);
    let client = Client::open(info).map_err(err)?;
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
