import type { RedisClient } from '../../jobs/redis.js';

/** Deletes every key that starts with `prefix:` (on each master of a Cluster). Returns how many. */
export async function deleteKeysUnder(redis: RedisClient, prefix: string): Promise<number> {
  const match = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`;
  const nodes = 'nodes' in redis && typeof redis.nodes === 'function' ? redis.nodes('master') : [redis];
  let deleted = 0;
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      // One key at a time: a Cluster refuses a multi-key DEL across slots.
      for (const key of keys) deleted += await node.del(key);
    } while (cursor !== '0');
  }
  return deleted;
}
