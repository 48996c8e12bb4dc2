//! Placeholder: the sidecar helper replaces this.
