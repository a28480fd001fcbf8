//! qbpeer: what quicbench's native HTTP/3 peers share (quinn, quiche).
//!
//! A *peer* is another implementation than quicbench's own that quicbench
//! runs as a child process and talks to over pipes: the *peer program
//! protocol*, the one the aioquic peer speaks (`peers/aioquic/server.py`,
//! `client.py`; the Go side is `endpoint/peer.go` and
//! `peers/aioquic/client.go`). This crate holds every part of it that does
//! not depend on the QUIC stack:
//!
//! * [`config`]: the server's `--config FILE` ([`config::ServerConfig`])
//!   and the client's request on stdin ([`config::ClientRequest`]), parsed
//!   and validated with errors that say what is wrong;
//! * [`events`]: the server's stdout lines (`ready`, `open`, `end` with
//!   [`events::ServerStats`]);
//! * [`record`]: the client's record on stdout ([`record::Record`], with
//!   `model.TransportStats`' Go field names) and the checks client.py makes
//!   on each response;
//! * [`resources`] and [`body`]: quicbench's resources, byte-identical to
//!   its own server: [`resources::Resources::respond`] turns a request
//!   into a [`resources::Response`] whose [`body::Body`] yields chunks on
//!   demand (pattern slices without copies, page HTML, PNG pieces, file
//!   reads, timed `/stream` segments with an injected clock);
//! * [`content`]: the pattern, `content.ParseSize`, Go durations, pages;
//! * [`sys`]: socket buffers, CPU time, NSS key log file, qlog names.
//!
//! A server program: parse the config, build `Resources`, bind the UDP
//! socket, [`sys::set_socket_buffers`], print [`events::ready`], and per
//! connection [`events::open`] / [`events::end`]; answer the stats lines
//! [`sys::on_stdin`] hands over with [`events::live`], and stop when it
//! reports the input's end. Per request stream: read the headers into a
//! [`resources::RequestHead`], the body into a [`resources::Upload`]
//! (`Upload::new(res.wants_body(&head))`, `data`, `finish`), then
//! `res.respond(&head, &upload)`; send `:status` and the headers (end the
//! stream when `body.is_empty()`), then loop on `body.next(now, max)`:
//! `Data` -> write it (the remainder too, when the stack takes less),
//! `Wait(t)` -> sleep until t, `End` -> finish the stream.

pub mod body;
pub mod config;
pub mod content;
pub mod events;
pub mod record;
pub mod resources;
pub mod sys;

pub use body::{Body, Next};
pub use config::{ClientRequest, ServerConfig};
pub use resources::{RequestHead, Resources, Response, Upload};
