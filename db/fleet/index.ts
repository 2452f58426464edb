// The fleet registry's statements (`fleet_processes`): a process joins, beats, leaves, and the
// live ones are read.

export { deleteProcess, forgetGoneProcesses, liveProcessRows, upsertProcess } from './processes.js';
