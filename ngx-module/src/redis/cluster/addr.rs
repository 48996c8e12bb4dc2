//! Addresses of the nodes a slot map names, resolved once each into nginx's form.
//!
//! Connections keep pointers to their peer's `sockaddr` and name, so these live in an nginx pool
//! owned by the table, which the cluster drops after every connection. A node is named by an IP
//! literal ([`super::slots::node_name`]), so parsing it never waits on DNS.

use std::collections::HashMap;
use std::{mem, ptr};

use nginx_sys::{
    ngx_create_pool, ngx_cycle, ngx_destroy_pool, ngx_parse_url, ngx_pool_t, ngx_str_t, ngx_url_t,
    NGX_OK,
};

use crate::conf::PeerAddr;

pub struct Addrs {
    pool: *mut ngx_pool_t,
    known: HashMap<Vec<u8>, PeerAddr>,
}

/// Node addresses are few (a dozen primaries and their replicas, plus those a failover adds).
const POOL_SIZE: usize = 4096;
/// A map naming more distinct nodes than this over a worker's life is not believed.
const MAX_NODES: usize = 1024;

impl Addrs {
    pub fn new() -> Self {
        // SAFETY: ngx_cycle and its log are set before any worker code runs; a null pool is
        // handled by every use below.
        let pool = unsafe { ngx_create_pool(POOL_SIZE, (*ngx_cycle).log) };
        Self {
            pool,
            known: HashMap::new(),
        }
    }

    /// The address of `node` (`ip:port`), parsed the first time it is asked for.
    pub fn get(&mut self, node: &[u8]) -> Option<PeerAddr> {
        if let Some(peer) = self.known.get(node) {
            return Some(*peer);
        }
        if self.pool.is_null() || self.known.len() >= MAX_NODES {
            return None;
        }
        let peer = self.parse(node)?;
        self.known.insert(node.to_vec(), peer);
        Some(peer)
    }

    fn parse(&self, node: &[u8]) -> Option<PeerAddr> {
        // SAFETY: ngx_url_t is plain data for which all-zero is the documented starting state;
        // the text is copied into our pool first, so the results may point into it, and they
        // live as long as the pool.
        unsafe {
            let url = ngx_str_t::from_bytes(self.pool, node)?;
            let mut u: ngx_url_t = mem::zeroed();
            u.url = url;
            if ngx_parse_url(self.pool, &mut u) != NGX_OK as isize
                || u.naddrs == 0
                || u.addrs.is_null()
            {
                return None;
            }
            let addr = u.addrs;
            Some(PeerAddr {
                sockaddr: (*addr).sockaddr,
                socklen: (*addr).socklen,
                name: ptr::addr_of_mut!((*addr).name),
            })
        }
    }
}

impl Drop for Addrs {
    fn drop(&mut self) {
        if !self.pool.is_null() {
            // SAFETY: the pool is ours; the cluster drops this table after every connection
            // that pointed into it.
            unsafe { ngx_destroy_pool(self.pool) };
        }
    }
}
