// Real Redis topologies on loopback for tests (see test/support/redis-topologies/servers.ts for how the
// servers are started, waited for and always cleaned up).

export { type RedisClusterHandle, startRedisCluster } from './redis-topologies/cluster.js';
export { type SentinelGroupHandle, startSentinelGroup } from './redis-topologies/sentinel.js';
export { type HostPort, redisServerAvailable } from './redis-topologies/servers.js';
export { startTlsRedis, type TlsRedisHandle } from './redis-topologies/tls.js';
