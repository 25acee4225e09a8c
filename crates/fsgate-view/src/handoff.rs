//! The FUSE device of a view mounted in a user namespace: the kernel mounts only a
//! device opened in the mount's own user namespace, so a child that is not root opens
//! `/dev/fuse` there, mounts it, and hands the descriptor to the gateway over a socket
//! pair (`SCM_RIGHTS`).

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd, RawFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
    recvmsg, socketpair,
};

/// A socket pair for one descriptor: (the gateway's end, the child's end).
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Sends `fd` over `socket` (the child's end, an inherited descriptor known by number).
pub(crate) fn send(socket: RawFd, fd: RawFd) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, sendmsg};
    let fds = [fd];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<UnixAddr>(
        socket,
        &[IoSlice::new(b"f")],
        &cmsg,
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

/// Receives the descriptor the child sends over `socket`; an error if the child ended
/// (or sent none).
pub fn receive(socket: impl AsFd) -> std::io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    if got.bytes == 0 {
        return Err(std::io::Error::other(
            "the child ended before it mounted the view",
        ));
    }
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(std::io::Error::other("the child sent no FUSE descriptor"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_crosses_the_pair() {
        let (ours, theirs) = pair().expect("pair");
        let file = std::fs::File::open("/proc/self/stat").expect("open");
        use std::os::fd::AsRawFd;
        send(theirs.as_raw_fd(), file.as_raw_fd()).expect("send");
        let got = receive(&ours).expect("receive");
        let (a, b) = (
            rustix::fs::fstat(&file).expect("fstat"),
            rustix::fs::fstat(&got).expect("fstat"),
        );
        assert_eq!((a.st_dev, a.st_ino), (b.st_dev, b.st_ino));
        drop(theirs);
        assert!(receive(&ours).is_err(), "an ended child sends nothing");
    }
}
