//! The agent's pipes: adopted by the runtime, written line by line, and the agent
//! killed when it outstays its grace.

use std::os::fd::AsFd;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::outbox::Queued;

/// The agent's stdin and stdout, enlarged (large answers, a whole file read, pass in
/// fewer pipe-fulls) and made async.
pub(super) fn agent_pipes(
    child: &mut std::process::Child,
) -> std::io::Result<(tokio::process::ChildStdin, tokio::process::ChildStdout)> {
    let agent_in = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("agent stdin not piped"))?;
    let agent_out = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("agent stdout not piped"))?;
    crate::stdio::enlarge_pipe(agent_in.as_fd());
    crate::stdio::enlarge_pipe(agent_out.as_fd());
    let agent_in = tokio::process::ChildStdin::from_std(agent_in)?;
    let agent_out = tokio::process::ChildStdout::from_std(agent_out)?;
    Ok((agent_in, agent_out))
}

/// Writes raw lines; with `close`, stops (dropping, so closing, the writer) when told.
pub(super) async fn write_raw<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Queued<Vec<u8>>>,
    mut out: W,
    close: Option<tokio::sync::oneshot::Receiver<()>>,
) -> std::io::Result<()> {
    let mut close = close;
    loop {
        let next = match close.as_mut() {
            Some(c) => tokio::select! {
                m = rx.recv() => m,
                _ = c => {
                    // Flush what is queued, then close.
                    while let Ok(m) = rx.try_recv() {
                        out.write_all(&m.msg).await?;
                    }
                    out.flush().await?;
                    let _ = out.shutdown().await;
                    return Ok(());
                }
            },
            None => rx.recv().await,
        };
        let Some(m) = next else { break };
        out.write_all(&m.msg).await?;
        out.flush().await?;
    }
    let _ = out.shutdown().await;
    Ok(())
}

pub(super) fn kill(pid: u32) {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // EPERM here means a Landlock signal scope on fsgate covers its own agent.
    if let Err(e) = rustix::process::kill_process(pid, rustix::process::Signal::KILL) {
        tracing::error!("cannot kill the agent (pid {}): {e}", pid.as_raw_nonzero());
    }
}
