//! A plain HTTP/3 fetcher that keeps whole responses: for tests that
//! compare what two servers send (the measuring client keeps no bodies).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use quinn::crypto::rustls::QuicClientConfig;

use crate::{root_store, Cc, Transport};

/// One response, whole.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// Sends `requests` ((method, path, body)) one after the other over one
/// connection to `remote` (verified with `ca_pem` for `sni`) and returns
/// the responses.
pub async fn fetch(
    remote: SocketAddr,
    sni: &str,
    ca_pem: &str,
    requests: &[(&str, &str, Vec<u8>)],
) -> Result<Vec<Fetched>, String> {
    let transport = Transport {
        cc: Cc::Cubic,
        datagram_size: 1452,
        max_data: 15 << 20,
        max_stream_data: 6 << 20,
        idle_timeout: std::time::Duration::from_secs(30),
        max_streams: 100,
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(root_store(ca_pem)?)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let mut cc = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?));
    cc.transport_config(Arc::new(transport.config(None)));
    let bind: SocketAddr = if remote.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("address");
    let endpoint = quinn::Endpoint::client(bind).map_err(|e| e.to_string())?;
    let conn = endpoint
        .connect_with(cc, remote, sni)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let (mut driver, mut send) = h3::client::builder()
        .build::<_, _, Bytes>(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| e.to_string())?;
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let mut out = Vec::new();
    for (method, path, body) in requests {
        let req = http::Request::builder()
            .method(*method)
            .uri(format!("https://{sni}:{}{path}", remote.port()))
            .body(())
            .map_err(|e| e.to_string())?;
        let mut s = send.send_request(req).await.map_err(|e| format!("{path}: {e}"))?;
        if !body.is_empty() {
            s.send_data(Bytes::copy_from_slice(body)).await.map_err(|e| format!("{path}: {e}"))?;
        }
        s.finish().await.map_err(|e| format!("{path}: {e}"))?;
        let resp = s.recv_response().await.map_err(|e| format!("{path}: {e}"))?;
        let mut data = Vec::new();
        while let Some(mut b) = s.recv_data().await.map_err(|e| format!("{path}: {e}"))? {
            while b.has_remaining() {
                let n = b.chunk().len();
                data.extend_from_slice(b.chunk());
                b.advance(n);
            }
        }
        out.push(Fetched { status: resp.status().as_u16(), headers: resp.headers().clone(), body: data });
    }
    drop(send);
    conn.close(quinn::VarInt::from_u32(0x100), b"");
    drive.abort();
    endpoint.wait_idle().await;
    Ok(out)
}
