//! kube-in-a-box: placeholder until the harness lands.
fn main() -> anyhow::Result<()> {
    anyhow::bail!("kube-in-a-box: not built yet")
}
