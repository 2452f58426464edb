// The audit trail's statements (`admin_actions`): writing an action and reading the latest.

export {
  type AdminAction,
  type AdminActionRow,
  recentAdminActions,
  recordAdminAction,
} from './admin-actions.js';
