package io.github.txnpreserver.config;

/** A broker.conf value the plugin cannot run with; the message names the key and the value. */
public class InvalidConfigException extends IllegalArgumentException {

    private static final long serialVersionUID = 1L;

    private final String key;

    public InvalidConfigException(String key, Object value, String problem) {
        super("Invalid broker configuration " + key + "=" + value + ": " + problem);
        this.key = key;
    }

    public String key() {
        return key;
    }
}
