/**
 * The coordinator's thread: the one door ({@code CoordinatorThread}) through which every part
 * that runs there is reached, the error a closed coordinator answers, and the rate-limited
 * logging of its repeated events.
 *
 * <p>Thread rule: {@code CoordinatorThread}'s methods may be called from any thread; the tasks
 * given to it run on the coordinator's thread, one at a time, until it closes. Code confined
 * to that thread says so with {@code assert thread.assertOwner()}.
 */
package io.github.txnpreserver.preserver.thread;
