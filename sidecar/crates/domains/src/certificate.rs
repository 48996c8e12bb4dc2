//! The certificate probe of the domain health job: a TLS handshake with the edge's HTTPS
//! listener, the domain as SNI, then the certificate it presents checked as a visitor's browser
//! would (chain to the trust roots, name, validity) and its notAfter read.
//!
//! The handshake itself accepts any certificate and the chain is verified once it is over: a
//! handshake that refused a bad certificate would leave nothing to read, and the operator wants
//! "expired 2 days ago" or "for another name, expires on …" rather than a bare handshake error.
//! The handshake's signatures are still checked, so the edge holds the key of what it presents.

use super::state::State;
use chrono::{DateTime, Utc};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use shortlink_core::outbound::tls;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use x509_cert::der::Decode;

/// What the probe found for one domain.
#[derive(Debug)]
pub struct Probed {
    /// notAfter of the certificate the edge presented, when one was read.
    pub expires_at: Option<DateTime<Utc>>,
    /// The finding when the certificate is not fine.
    pub problem: Option<(State, String)>,
}

pub struct CertificateProbe {
    edge: SocketAddr,
    min_validity: chrono::Duration,
    /// Verifies the chain after the handshake, against the configured roots.
    verifier: Arc<WebPkiServerVerifier>,
    /// Handshakes with `AfterHandshake`: every certificate gets through to be judged.
    client: tokio_rustls::TlsConnector,
}

impl CertificateProbe {
    /// `ca`: a PEM file of roots; `None` takes the system's. Errors name the cause for startup.
    pub fn new(edge: SocketAddr, ca: Option<&Path>, min_days: u32) -> Result<Self, String> {
        // ring, as the rest of the tree; never the process-wide default provider, which the
        // tests and other crates may set differently.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(tls::roots(ca, "--certificate-ca")?);
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
            .build()
            .map_err(|e| format!("certificate roots: {e}"))?;
        let config = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS settings: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AfterHandshake { provider }))
            .with_no_client_auth();
        Ok(Self {
            edge,
            min_validity: chrono::Duration::days(i64::from(min_days)),
            verifier,
            client: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    pub async fn check(&self, domain: &str, timeout: Duration) -> Probed {
        let unreachable = |reason: String| Probed {
            expires_at: None,
            problem: Some((State::Unreachable, format!("certificate: {reason}"))),
        };
        let Ok(name) = ServerName::try_from(domain.to_owned()) else {
            return unreachable(format!("{domain:?} is not a host name"));
        };
        let handshake = async {
            let tcp = TcpStream::connect(self.edge).await?;
            self.client.connect(name.clone(), tcp).await
        };
        let chain: Vec<CertificateDer<'static>> = match tokio::time::timeout(timeout, handshake)
            .await
        {
            Err(_) => return unreachable(format!("no TLS answer from the edge in {timeout:?}")),
            Ok(Err(e)) => return unreachable(format!("TLS handshake with the edge failed: {e}")),
            Ok(Ok(stream)) => stream
                .get_ref()
                .1
                .peer_certificates()
                .unwrap_or_default()
                .iter()
                .map(|c| c.clone().into_owned())
                .collect(),
        };
        let Some((leaf, intermediates)) = chain.split_first() else {
            return unreachable("the edge presented no certificate".into());
        };
        let expires_at = not_after(leaf);
        let now = Utc::now();
        let problem =
            match self
                .verifier
                .verify_server_cert(leaf, intermediates, &name, &[], UnixTime::now())
            {
                // A browser refuses it: HTTPS links on the domain do not open at all.
                Err(e) => Some((
                    State::Unreachable,
                    format!("certificate: {}", refusal(&e, domain, expires_at)),
                )),
                Ok(_) => match expires_at {
                    None => Some((
                        State::Degraded,
                        "certificate: its expiry date cannot be read".to_owned(),
                    )),
                    Some(at) if at - now < self.min_validity => Some((
                        State::Degraded,
                        format!(
                            "certificate: expires in {} days ({})",
                            (at - now).num_days(),
                            at.format("%Y-%m-%d %H:%M UTC")
                        ),
                    )),
                    Some(_) => None,
                },
            };
        Probed {
            expires_at,
            problem,
        }
    }
}

/// notAfter of a DER certificate, `None` when it does not parse.
fn not_after(cert: &CertificateDer<'_>) -> Option<DateTime<Utc>> {
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    let since_epoch = cert.tbs_certificate.validity.not_after.to_unix_duration();
    DateTime::from_timestamp(i64::try_from(since_epoch.as_secs()).ok()?, 0)
}

/// Why a browser would refuse the certificate, in the words an operator acts on.
fn refusal(error: &rustls::Error, domain: &str, expires_at: Option<DateTime<Utc>>) -> String {
    let date = |at: Option<DateTime<Utc>>| {
        at.map_or_else(String::new, |at| {
            format!(" ({})", at.format("%Y-%m-%d %H:%M UTC"))
        })
    };
    match error {
        rustls::Error::InvalidCertificate(e) => match e {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                format!("expired{}", date(expires_at))
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!("not valid for {domain}")
            }
            CertificateError::UnknownIssuer => "not issued by a trusted root".to_owned(),
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "not valid yet".to_owned()
            }
            CertificateError::Revoked => "revoked".to_owned(),
            CertificateError::BadSignature => "bad signature".to_owned(),
            other => format!("invalid: {other}"),
        },
        other => format!("invalid: {other}"),
    }
}

/// Lets every certificate through the handshake (it is judged right after, see the module doc)
/// while checking the handshake's signatures against the presented key.
#[derive(Debug)]
struct AfterHandshake {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AfterHandshake {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
