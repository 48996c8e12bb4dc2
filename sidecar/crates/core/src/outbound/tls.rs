//! TLS clients that verify as browsers do, against a PEM file the operator names or the
//! system's roots: the certificate probe, the domain webhook and every outbound HTTPS client.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;

/// A TLS client that verifies as browsers do, against `ca` (a PEM file named by `flag`) or the
/// system's roots: the https:// webhook's.
pub fn verifying_connector(
    ca: Option<&Path>,
    flag: &str,
) -> Result<tokio_rustls::TlsConnector, String> {
    let config = verifying_config(ca, flag)?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The settings of [`verifying_connector`], for clients that make their own connections (the
/// click webhooks' pooled HTTP client).
pub fn verifying_config(ca: Option<&Path>, flag: &str) -> Result<ClientConfig, String> {
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS settings: {e}"))?
            .with_root_certificates(roots(ca, flag)?)
            .with_no_client_auth(),
    )
}

pub fn roots(ca: Option<&Path>, flag: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("{flag} {}: not a usable root: {e}", path.display()))?;
            }
        }
        None => {
            // Unreadable entries of the system store are skipped, as every TLS client does.
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    if roots.is_empty() {
        return Err(match ca {
            Some(path) => format!("{flag} {}: no certificate in it", path.display()),
            None => format!("no system trust roots found; name a PEM file with {flag}"),
        });
    }
    Ok(roots)
}
