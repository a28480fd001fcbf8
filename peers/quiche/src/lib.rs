//! quicbench's quiche peer: an HTTP/3 server (`qb-quiche-server`) and client
//! (`qb-quiche-client`) on Cloudflare's quiche, speaking quicbench's peer
//! program protocol (crate qbpeer). See README.md.

pub mod cli;
pub mod client;
pub mod io;
pub mod pacing;
pub mod server;
pub mod transport;
