//! Placeholder: the module helper replaces this.
