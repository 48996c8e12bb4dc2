//! `shortlink_redis_cluster`: its parser (seeds resolved once, at config time); the table row is
//! in `commands.rs`.

use nginx_sys::ngx_conf_t;

use super::parse::{self, ArgError};
use super::shim::resolve;
use super::RedisCluster;

pub fn redis_cluster(cf: &mut ngx_conf_t, args: &[&[u8]]) -> Result<RedisCluster, ArgError> {
    let args = parse::redis_cluster(args)?;
    let seeds = args
        .seeds
        .iter()
        .map(|seed| resolve(cf, seed))
        .collect::<Result<_, _>>()?;
    Ok(RedisCluster {
        spec: args.spec,
        seeds,
        read_replicas: args.read_replicas,
    })
}
