// The fleet: the registry every long-running process joins, the settings every worker must share,
// and how `status` and the overview tell them.

export {
  describeDisagreement,
  fleetDisagreements,
  formatFleet,
  leaseLine,
  nameProcesses,
  workersLacking,
} from './format.js';
export { type FleetEntry, type FleetMembership, fleetCounts, joinFleet, liveFleet } from './registry.js';
export { fleetRateLimit, showSetting, strictestMaxAge } from './shared-settings.js';
export { thisProcess } from './this-process.js';
