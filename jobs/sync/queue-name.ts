/** The sync queue's name: BullMQ's keys and this project's own beside them start with it. */
export const QUEUE_NAME = 'saved-cards-sync';
