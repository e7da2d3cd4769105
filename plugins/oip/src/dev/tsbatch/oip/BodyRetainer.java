package dev.tsbatch.oip;

import io.netty.handler.codec.http.FullHttpRequest;
import java.lang.reflect.Field;
import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import org.pytorch.serve.http.HttpRequestHandlerChain;
import org.pytorch.serve.wlm.ModelManager;
import org.pytorch.serve.wlm.WorkLoadManager;

/**
 * Keeps a plugin request's body alive until the plugin has run.
 *
 * <p>TorchServe 0.12 runs endpoint plugins on its task pool, after the Netty handler has
 * returned and released the request, so a plugin that reads a POST body finds it freed
 * (IllegalReferenceCountException). Owning /v2 means owning POST /v2/models/{m}/infer, so
 * this wraps that pool: a plugin task (a lambda of HttpRequestHandlerChain capturing the
 * request) retains its request when it is submitted, still on the Netty thread, and
 * releases it after running. Other tasks pass through unchanged.
 *
 * <p>The pool belongs to the WorkLoadManager, created after plugins are loaded and before
 * the HTTP ports open; a daemon thread installs the wrapper as soon as it exists.
 */
final class BodyRetainer extends AbstractExecutorService {
    private static final String CHAIN_LAMBDA = HttpRequestHandlerChain.class.getName() + "$$Lambda";

    private final ExecutorService pool;

    private BodyRetainer(ExecutorService pool) {
        this.pool = pool;
    }

    static void installWhenReady() {
        Thread installer = new Thread(BodyRetainer::install, "tsbatch-oip-body-retainer");
        installer.setDaemon(true);
        installer.start();
    }

    private static void install() {
        try {
            ModelManager manager;
            while ((manager = ModelManager.getInstance()) == null) {
                Thread.sleep(2);
            }
            Field wlmField = ModelManager.class.getDeclaredField("wlm");
            wlmField.setAccessible(true);
            WorkLoadManager wlm = (WorkLoadManager) wlmField.get(manager);
            Field poolField = WorkLoadManager.class.getDeclaredField("threadPool");
            poolField.setAccessible(true);
            synchronized (wlm) {
                ExecutorService pool = (ExecutorService) poolField.get(wlm);
                if (!(pool instanceof BodyRetainer)) {
                    poolField.set(wlm, new BodyRetainer(pool));
                }
            }
        } catch (ReflectiveOperationException | RuntimeException exc) {
            System.err.println("tsbatch oip plugin: POST bodies cannot be retained: " + exc);
        } catch (InterruptedException exc) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void execute(Runnable task) {
        FullHttpRequest request = capturedRequest(task);
        if (request == null) {
            pool.execute(task);
            return;
        }
        request.retain();
        try {
            pool.execute(() -> {
                try {
                    task.run();
                } finally {
                    request.release();
                }
            });
        } catch (RuntimeException exc) {
            request.release();
            throw exc;
        }
    }

    /** The request a plugin task captured, or null when the task is not a plugin's. */
    private static FullHttpRequest capturedRequest(Runnable task) {
        if (!task.getClass().getName().startsWith(CHAIN_LAMBDA)) {
            return null;
        }
        for (Field field : task.getClass().getDeclaredFields()) {
            try {
                field.setAccessible(true);
                Object value = field.get(task);
                if (value instanceof FullHttpRequest) {
                    return (FullHttpRequest) value;
                }
            } catch (ReflectiveOperationException | RuntimeException exc) {
                return null;
            }
        }
        return null;
    }

    @Override
    public void shutdown() {
        pool.shutdown();
    }

    @Override
    public List<Runnable> shutdownNow() {
        return pool.shutdownNow();
    }

    @Override
    public boolean isShutdown() {
        return pool.isShutdown();
    }

    @Override
    public boolean isTerminated() {
        return pool.isTerminated();
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
        return pool.awaitTermination(timeout, unit);
    }
}
