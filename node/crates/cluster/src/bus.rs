//! Cluster-bus networking: the listener, one outbound link per known node, inbound links,
//! and the 10 Hz cron. All decisions are made by `ClusterState`; this module moves bytes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use parking_lot::{Mutex, RwLock};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::{debug, info, instrument, warn};

use crate::config::ClusterConfig;
use crate::msg;
use crate::nodes_conf::{self, NodesConfError};
use crate::route_table::{self, RouteTable};
use crate::routing::{Route, RouteQuery};
use crate::save::{self, Pending, SaveStats, Saver};
use crate::state::{ClusterState, LinkId, Out};
use crate::{BusTls, Host};

/// Errors starting the bus.
#[derive(Debug, Error)]
pub enum BusError {
    #[error(transparent)]
    Config(#[from] NodesConfError),
    /// Peers drop messages with an address that is not an IP literal, and nodes.conf
    /// would not load again.
    #[error("cluster-announce-ip '{0}' is not an IP address")]
    AnnounceIp(String),
    #[error("cannot listen on cluster bus {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

struct LinkIo {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    /// Bytes sent to `tx` and not yet written (shared with the state's LinkInfo).
    queued: Arc<AtomicU64>,
    tasks: Vec<AbortHandle>,
}

struct Shared {
    state: Mutex<ClusterState>,
    links: Mutex<HashMap<LinkId, LinkIo>>,
    pending_connects: Mutex<HashMap<LinkId, AbortHandle>>,
    host: Arc<dyn Host>,
    tasks: Mutex<Vec<AbortHandle>>,
    saver: Saver,
    /// Routing snapshot, rebuilt under the state lock when its inputs changed and a
    /// command routes (a resharding changes slots thousands of times between commands).
    route: RwLock<RouteTable>,
    /// Fingerprint of the state the snapshot must reflect (set under the state lock at
    /// every change); a snapshot with another fingerprint is stale and not used.
    route_want: AtomicU64,
    /// Identity of the node's config snapshot last applied by
    /// [`ClusterNode::refresh_config_now`] (0: none yet).
    config_token: AtomicU64,
    /// The bus's runtime: a CLUSTER MEET run on a command thread dials from here.
    rt: tokio::runtime::Handle,
}

/// A running cluster node: state plus its bus. Dropping it stops every task and link.
pub struct ClusterNode {
    shared: Arc<Shared>,
    bus_addr: SocketAddr,
}

impl ClusterNode {
    /// Loads (or creates) nodes.conf, binds the bus port and starts the cron.
    #[instrument(skip_all, fields(port = config.port))]
    pub async fn start(
        mut config: ClusterConfig,
        host: Arc<dyn Host>,
    ) -> Result<ClusterNode, BusError> {
        // The bus port is chosen once: a later CONFIG SET of tls-port or tls-cluster does
        // not move the listener, so what is announced must not move either.
        config.cluster_port = config.bus_port();
        if let Some(ip) = config.announce_ip.as_deref() {
            if !crate::validate::is_addr(ip) {
                return Err(BusError::AnnounceIp(ip.to_string()));
            }
        }
        let now = now_ms();
        let seed = rand::random::<u64>();
        let path = config.config_file.clone();
        let mut state = match nodes_conf::load(&path, config.clone(), now, seed)? {
            Some(st) => {
                info!(file = %path.display(), "loaded cluster config");
                st
            }
            None => ClusterState::new(config.clone(), now, seed),
        };
        state.sync_myself_config();
        let addr = format!("{}:{}", config.bind, config.bus_port());
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| BusError::Bind {
                addr: addr.clone(),
                source,
            })?;
        let bus_addr = listener
            .local_addr()
            .map_err(|source| BusError::Bind { addr, source })?;
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            links: Mutex::new(HashMap::new()),
            pending_connects: Mutex::new(HashMap::new()),
            host,
            tasks: Mutex::new(Vec::new()),
            saver: Saver::default(),
            route: RwLock::new(RouteTable::default()),
            route_want: AtomicU64::new(u64::MAX),
            config_token: AtomicU64::new(0),
            rt: tokio::runtime::Handle::current(),
        });
        locked(&shared, |_| ());
        let s2 = shared.clone();
        let accept = tokio::spawn(async move { accept_loop(s2, listener).await });
        let s3 = shared.clone();
        let cron = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let mut live = s3.state.lock().config.clone();
                s3.host.refresh_config(&mut live);
                let replicating = s3.host.replication_master();
                let loading = s3.host.loading();
                locked(&s3, |st| {
                    st.host_loading = loading;
                    st.apply_config(&live);
                    if let Some(target) = replicating {
                        st.note_replication_target(target);
                    }
                    st.cron(now_ms());
                    st.free_links_over_sendbuf_limit(now_ms());
                });
                save_pending(&s3);
            }
        });
        shared
            .tasks
            .lock()
            .extend([accept.abort_handle(), cron.abort_handle()]);
        Ok(ClusterNode { shared, bus_addr })
    }

    /// The bound bus address.
    pub fn bus_addr(&self) -> SocketAddr {
        self.bus_addr
    }

    /// Runs `f` on the state, then performs the effects it queued and saves if needed.
    pub fn with_state<R>(&self, f: impl FnOnce(&mut ClusterState) -> R) -> R {
        locked(&self.shared, f)
    }

    /// Routes `q` from the routing snapshot without locking the cluster state; None when
    /// the answer depends on the keyspace (an open slot): then use `routing::route` under
    /// [`ClusterNode::with_state`].
    #[inline]
    pub fn route_fast(&self, q: &RouteQuery) -> Option<Route> {
        let want = self.shared.route_want.load(Ordering::Acquire);
        let t = self.shared.route.read();
        if t.fingerprint() != want {
            return None;
        }
        t.route(q)
    }

    /// Rebuilds a stale routing snapshot; true if it rebuilt one (then retry
    /// [`ClusterNode::route_fast`]).
    pub fn refresh_route_table(&self) -> bool {
        let want = self.shared.route_want.load(Ordering::Acquire);
        if self.shared.route.read().fingerprint() == want {
            return false;
        }
        let st = self.shared.state.lock();
        rebuild_route_table(&self.shared, &st);
        true
    }

    /// Routes `q` from the full state (an open slot: `exists` answers for its keys, which
    /// the caller must look up before, since keyspace locks are never taken under the
    /// cluster lock). Changes nothing, so nothing is saved.
    pub fn route_slow(&self, q: &RouteQuery, exists: impl Fn(&[u8]) -> bool) -> Route {
        let st = self.shared.state.lock();
        crate::routing::route(&st, q, exists)
    }

    /// The bus message and link counters (CLUSTER INFO, INFO cluster).
    pub fn stats(&self) -> crate::state::Stats {
        self.shared.state.lock().stats.clone()
    }

    /// nodes.conf writes and fsyncs so far (group commit makes them far fewer than changes).
    pub fn save_stats(&self) -> SaveStats {
        self.shared.saver.stats()
    }

    /// The keyspace/pubsub host this node was started with.
    /// Applies the run-time settable config at once (not at the next cron tick) when
    /// `token`, an identity of the node's config snapshot, differs from the last one seen:
    /// right after CONFIG SET, CLUSTER SLOTS and redirects use the new hostname and
    /// preferred endpoint type, as Redis's config apply functions make them.
    pub fn refresh_config_now(&self, token: u64) {
        if self.shared.config_token.swap(token, Ordering::AcqRel) == token {
            return;
        }
        let mut live = self.shared.state.lock().config.clone();
        self.shared.host.refresh_config(&mut live);
        locked(&self.shared, |st| {
            st.apply_config(&live);
        });
    }

    pub fn host(&self) -> &Arc<dyn Host> {
        &self.shared.host
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        // Peer-driven changes may still wait for the cron's save.
        save_pending(&self.shared);
        for t in self.shared.tasks.lock().drain(..) {
            t.abort();
        }
        for (_, l) in self.shared.links.lock().drain() {
            for t in l.tasks {
                t.abort();
            }
        }
        for (_, t) in self.shared.pending_connects.lock().drain() {
            t.abort();
        }
    }
}

/// Effects on the node's keyspace/pub-sub, run after the state lock is released.
enum HostEffect {
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
        shard: bool,
    },
    SetMaster(Option<(String, u16)>),
    DeleteSlotKeys(u16),
    FlushAll,
    PauseWrites(u64),
}

/// What one locked section leaves to do once the state is unlocked.
#[must_use]
struct Deferred {
    host: Vec<HostEffect>,
    /// Messages held back until an fsync-requiring change is on disk (a vote must not leave
    /// before the vote epoch is durable: Redis's write barrier).
    sends: Vec<(LinkId, Vec<u8>)>,
    save: Option<Pending>,
}

/// Performs the network effects queued in the state and numbers the change to save.
fn dispatch(shared: &Arc<Shared>, st: &mut ClusterState) -> Deferred {
    let outs: Vec<Out> = std::mem::take(&mut st.out);
    if st.todo_update_state {
        st.update_state(now_ms());
    }
    let save = save::take_dirty(st);
    let hold = save.is_some_and(|p| p.fsync);
    let mut d = Deferred {
        host: Vec::new(),
        sends: Vec::new(),
        save,
    };
    for o in outs {
        match o {
            Out::Send { link, msg } => {
                let bytes = msg::encode(&msg);
                if hold {
                    d.sends.push((link, bytes));
                } else {
                    send_bytes(shared, link, bytes);
                }
            }
            Out::Connect { link, ip, cport } => {
                let s = shared.clone();
                let nt = st.config.node_timeout_ms.max(1000);
                let h = shared
                    .rt
                    .spawn(async move { connect(s, link, ip, cport, nt).await });
                shared
                    .pending_connects
                    .lock()
                    .insert(link, h.abort_handle());
            }
            Out::Close { link } => close_io(shared, link),
            Out::Publish {
                channel,
                message,
                shard,
            } => d.host.push(HostEffect::Publish {
                channel,
                message,
                shard,
            }),
            Out::SetMaster { ip } => d.host.push(HostEffect::SetMaster(ip)),
            Out::DeleteSlotKeys { slot } => d.host.push(HostEffect::DeleteSlotKeys(slot)),
            Out::FlushAll => d.host.push(HostEffect::FlushAll),
            Out::PauseWrites { until } => d.host.push(HostEffect::PauseWrites(until)),
        }
    }
    d
}

/// Marks the routing snapshot stale if the state it reflects changed (state locked, so
/// every reader after this change sees it); the next command that routes rebuilds it.
fn publish_route_table(shared: &Shared, st: &ClusterState) {
    let fp = route_table::fingerprint(st);
    // Written only on change: every command that routes reads this word.
    if shared.route_want.load(Ordering::Relaxed) != fp {
        shared.route_want.store(fp, Ordering::Release);
    }
}

/// Rebuilds the routing snapshot from the state if stale (state locked).
fn rebuild_route_table(shared: &Shared, st: &ClusterState) {
    let fp = route_table::fingerprint(st);
    shared.route_want.store(fp, Ordering::Release);
    if shared.route.read().fingerprint() != fp {
        let t = RouteTable::build(st, fp);
        let old = std::mem::replace(&mut *shared.route.write(), t);
        drop(old);
    }
}

fn send_bytes(shared: &Shared, link: LinkId, bytes: Vec<u8>) {
    if let Some(l) = shared.links.lock().get(&link) {
        let n = bytes.len() as u64;
        if l.tx.send(bytes).is_ok() {
            l.queued.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Runs `f` with the state locked and performs its network effects; unlocks; saves
/// nodes.conf if `f` changed it (returning only once the change is written, as Redis
/// saves before writing replies); then runs its host effects (so the node's callbacks
/// never run under the cluster lock).
fn locked<R>(shared: &Arc<Shared>, f: impl FnOnce(&mut ClusterState) -> R) -> R {
    locked_with(shared, true, f)
}

/// [`locked`] for messages from peers: a change that needs no fsync is left for the cron's
/// next save (within 100 ms), so a burst of gossip costs one write instead of one per
/// message; fsync-requiring changes (votes, epochs) are still saved before anything leaves.
fn locked_lazy<R>(shared: &Arc<Shared>, f: impl FnOnce(&mut ClusterState) -> R) -> R {
    locked_with(shared, false, f)
}

/// Saves whatever changes are not on disk yet (the cron's catch-up for [`locked_lazy`]).
fn save_pending(shared: &Shared) {
    let seq = shared.state.lock().dirty_seq;
    shared
        .saver
        .save_upto(seq, || save::render(&shared.state.lock()));
}

fn locked_with<R>(shared: &Arc<Shared>, sync: bool, f: impl FnOnce(&mut ClusterState) -> R) -> R {
    let (r, d) = {
        let mut st = shared.state.lock();
        let r = f(&mut st);
        let d = dispatch(shared, &mut st);
        publish_route_table(shared, &st);
        (r, d)
    };
    if let Some(p) = d.save.filter(|p| sync || p.fsync) {
        shared
            .saver
            .save_upto(p.seq, || save::render(&shared.state.lock()));
    }
    for (link, bytes) in d.sends {
        send_bytes(shared, link, bytes);
    }
    run_host(shared, d.host);
    r
}

fn run_host(shared: &Arc<Shared>, effects: Vec<HostEffect>) {
    for e in effects {
        match e {
            HostEffect::Publish {
                channel,
                message,
                shard,
            } => shared.host.publish_local(&channel, &message, shard),
            HostEffect::SetMaster(m) => shared.host.set_replication_master(m),
            HostEffect::DeleteSlotKeys(slot) => {
                shared.host.delete_keys_in_slot(slot);
            }
            HostEffect::FlushAll => shared.host.flush_all(),
            HostEffect::PauseWrites(until) => {
                let offset = shared.host.pause_writes(until);
                if until != 0 {
                    locked(shared, |st| st.manual_failover_paused(offset));
                }
            }
        }
    }
}

fn close_io(shared: &Shared, link: LinkId) {
    if let Some(l) = shared.links.lock().remove(&link) {
        for t in l.tasks {
            t.abort();
        }
    }
    if let Some(t) = shared.pending_connects.lock().remove(&link) {
        t.abort();
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "bus accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let tls = match shared.host.bus_tls() {
            Ok(t) => t,
            Err(e) => {
                warn!(%peer, error = %e, "bus link refused: the TLS settings do not load");
                continue;
            }
        };
        // Through `locked`: accepting may close the oldest unidentified link.
        let (link, queued) = locked(&shared, |st| {
            let link = st.link_accepted(now_ms());
            (link, queued_of(st, link))
        });
        debug!(%peer, link, tls = tls.is_some(), "inbound bus link");
        start_link_io(&shared, link, sock, tls, queued, true);
    }
}

/// Dials a peer's bus port. Like Redis, outgoing links use our bind address as source, so a
/// node bound to one IP of a multi-IP host is seen by peers at that IP.
async fn dial(ip: &str, cport: u16, bind: &str) -> std::io::Result<TcpStream> {
    let target: std::net::IpAddr = ip
        .parse()
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad peer ip"))?;
    let sock = if target.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    if let Ok(src) = bind.parse::<std::net::IpAddr>() {
        if !src.is_unspecified() && src.is_ipv4() == target.is_ipv4() {
            sock.bind(SocketAddr::new(src, 0))?;
        }
    }
    sock.connect(SocketAddr::new(target, cport)).await
}

async fn connect(shared: Arc<Shared>, link: LinkId, ip: String, cport: u16, timeout_ms: u64) {
    let bind = shared.state.lock().config.bind.clone();
    let res =
        tokio::time::timeout(Duration::from_millis(timeout_ms), dial(&ip, cport, &bind)).await;
    shared.pending_connects.lock().remove(&link);
    let res = match res {
        Ok(Ok(sock)) => match shared.host.bus_tls() {
            Ok(tls) => Ok((sock, tls)),
            Err(e) => {
                warn!(ip, cport, error = %e, "bus link not made: the TLS settings do not load");
                Err(())
            }
        },
        _ => Err(()),
    };
    match res {
        Ok((sock, tls)) => {
            let _ = sock.set_nodelay(true);
            locked(&shared, |st| {
                if st.links.contains_key(&link) {
                    start_link_io(&shared, link, sock, tls, queued_of(st, link), false);
                    st.link_connected(link, now_ms());
                }
            });
        }
        _ => {
            debug!(ip, cport, "bus connect failed");
            locked(&shared, |st| st.link_closed(link, now_ms()));
        }
    }
}

/// The send-queue counter of a link (shared by the state and the writer task).
fn queued_of(st: &ClusterState, link: LinkId) -> Arc<AtomicU64> {
    st.links
        .get(&link)
        .map(|l| l.send_queued.clone())
        .unwrap_or_default()
}

fn start_link_io(
    shared: &Arc<Shared>,
    link: LinkId,
    sock: TcpStream,
    tls: Option<BusTls>,
    queued: Arc<AtomicU64>,
    inbound: bool,
) {
    let peer = sock.peer_addr().ok();
    let peer_ip = peer.map(|a| a.ip().to_string()).unwrap_or_default();
    let local_ip = sock
        .local_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let q = queued.clone();
    let s = shared.clone();
    let tasks = if let Some(tls) = tls {
        let task = tokio::spawn(async move {
            let ends = TlsLink {
                tls,
                peer: peer.map(|a| a.ip()),
                peer_ip,
                local_ip,
                inbound,
            };
            let why = ends.run(&s, link, sock, rx, q).await;
            link_ended(&s, link, why);
        });
        vec![task.abort_handle()]
    } else {
        let (mut rd, mut wr) = sock.into_split();
        let writer = tokio::spawn(async move {
            while let Some(b) = rx.recv().await {
                if wr.write_all(&b).await.is_err() {
                    break;
                }
                q.fetch_sub(b.len() as u64, Ordering::Relaxed);
            }
        });
        let reader = tokio::spawn(async move {
            let why = read_loop(&s, link, &mut rd, &peer_ip, &local_ip, inbound).await;
            link_ended(&s, link, why);
        });
        vec![writer.abort_handle(), reader.abort_handle()]
    };
    shared
        .links
        .lock()
        .insert(link, LinkIo { tx, queued, tasks });
}

/// A link's reading side stopped (`why`): its tasks go and the state learns it is closed.
fn link_ended(shared: &Arc<Shared>, link: LinkId, why: String) {
    debug!(link, why, "bus link closed");
    close_io(shared, link);
    locked(shared, |st| st.link_closed(link, now_ms()));
}

/// A bus link over TLS (tls-cluster): the handshake, then reads and writes in one task, so
/// the TLS session's reads and writes never wait on each other's wake-ups.
struct TlsLink {
    tls: BusTls,
    peer: Option<std::net::IpAddr>,
    peer_ip: String,
    local_ip: String,
    inbound: bool,
}

impl TlsLink {
    async fn run(
        self,
        shared: &Arc<Shared>,
        link: LinkId,
        sock: TcpStream,
        mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
        queued: Arc<AtomicU64>,
    ) -> String {
        let stream: tokio_rustls::TlsStream<TcpStream> = if self.inbound {
            match tokio_rustls::TlsAcceptor::from(self.tls.server)
                .accept(sock)
                .await
            {
                Ok(s) => s.into(),
                Err(e) => return format!("TLS handshake failed: {e}"),
            }
        } else {
            // The peer's name is not checked (the chain is, as Redis does): its IP is what
            // we know it by.
            let Some(ip) = self.peer else {
                return "no peer address".into();
            };
            let name = tokio_rustls::rustls::pki_types::ServerName::IpAddress(ip.into());
            match tokio_rustls::TlsConnector::from(self.tls.client)
                .connect(name, sock)
                .await
            {
                Ok(s) => s.into(),
                Err(e) => return format!("TLS handshake failed: {e}"),
            }
        };
        let (mut rd, mut wr) = tokio::io::split(stream);
        let writer = async {
            while let Some(b) = rx.recv().await {
                // The bytes leave the TLS session's buffer at each message.
                if let Err(e) = async {
                    wr.write_all(&b).await?;
                    wr.flush().await
                }
                .await
                {
                    return e.to_string();
                }
                queued.fetch_sub(b.len() as u64, Ordering::Relaxed);
            }
            "link dropped".to_string()
        };
        let reader = read_loop(
            shared,
            link,
            &mut rd,
            &self.peer_ip,
            &self.local_ip,
            self.inbound,
        );
        tokio::select! {
            why = reader => why,
            why = writer => why,
        }
    }
}

/// Reads frames until EOF or a protocol violation. Memory grows only with bytes actually
/// received, never with what a header claims, and an inbound link not yet bound to a known
/// node may not declare a frame over [`msg::MAX_UNIDENTIFIED_MSG_LEN`] (timeouts are the
/// cron's: `ClusterState::close_stale_inbound_links`).
async fn read_loop(
    shared: &Arc<Shared>,
    link: LinkId,
    rd: &mut (impl tokio::io::AsyncRead + Unpin),
    peer_ip: &str,
    local_ip: &str,
    inbound: bool,
) -> String {
    let mut buf = BytesMut::with_capacity(msg::HEADER_LEN * 2);
    let mut identified = !inbound;
    loop {
        while buf.len() < 8 {
            match rd.read_buf(&mut buf).await {
                Ok(0) => return "eof".into(),
                Ok(_) => {}
                Err(e) => return e.to_string(),
            }
        }
        let totlen = match msg::frame_len(&buf[..8]) {
            Ok(t) if !identified && t > msg::MAX_UNIDENTIFIED_MSG_LEN => {
                return format!("frame of {t} bytes on an unidentified link");
            }
            Ok(t) => t,
            Err(e) => return format!("bad frame: {e}"),
        };
        while buf.len() < totlen {
            let want = (totlen - buf.len()).min(1 << 16);
            buf.reserve(want);
            match rd.read_buf(&mut buf).await {
                Ok(0) => return "eof in message".into(),
                Ok(_) => {}
                Err(e) => return e.to_string(),
            }
        }
        let frame = buf.split_to(totlen);
        let m = match msg::decode(&frame) {
            Ok(m) => m,
            Err(e) => return format!("bad message: {e}"),
        };
        let filter = shared.host.drop_packet_filter();
        let known = locked_lazy(shared, |st| {
            if !st.links.contains_key(&link) {
                return None;
            }
            st.drop_packet_filter = filter;
            st.process(link, m, peer_ip, local_ip, now_ms());
            Some(st.links.get(&link).is_some_and(|l| l.node.is_some()))
        });
        match known {
            None => return "link dropped by state".into(),
            Some(bound) => identified |= bound,
        }
    }
}
