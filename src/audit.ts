import { userInfo } from 'node:os';

/** Who runs this CLI, for `admin_actions.actor`: the OS user (`USER` when the system cannot say). */
export function cliActor(env: Record<string, string | undefined> = process.env): string {
  try {
    return userInfo().username;
  } catch {
    return env.USER ?? env.LOGNAME ?? 'unknown';
  }
}
