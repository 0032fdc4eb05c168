// Kafka 4.4's checks of the share-group broker configs, for test_share_config_bounds_vs_kafka.py:
// run as `java -cp <Kafka 4.4's lib/*> ShareConfigBounds.java`, it reads cases from stdin, one a
// line (space-separated KEY=VALUE words, or "defs"), and prints one answer a line: "ok", the
// exception Kafka's GroupCoordinatorConfig and ShareGroupConfig raise for those broker configs
// ("IllegalArgumentException: ..." or "ConfigException: ..."), or for "defs" every group.share.*
// config they define as "def NAME DEFAULT VALIDATOR", then "end".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.coordinator.group.GroupCoordinatorConfig;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfig;

public class ShareConfigBounds {
    static ConfigDef definitions() {
        ConfigDef def = new ConfigDef();
        for (ConfigDef.ConfigKey key : GroupCoordinatorConfig.CONFIG_DEF.configKeys().values()) {
            def.define(key);
        }
        for (ConfigDef.ConfigKey key : ShareGroupConfig.CONFIG_DEF.configKeys().values()) {
            if (!def.names().contains(key.name)) {
                def.define(key);
            }
        }
        return def;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("defs")) {
                for (ConfigDef.ConfigKey key : definitions().configKeys().values()) {
                    if (key.name.startsWith("group.share.")) {
                        System.out.println("def " + key.name + " " + key.defaultValue + " " + key.validator);
                    }
                }
                System.out.println("end");
                continue;
            }
            Map<String, Object> props = new HashMap<>();
            if (!line.isEmpty()) {
                for (String word : line.split(" ")) {
                    String[] kv = word.split("=", 2);
                    props.put(kv[0], kv[1]);
                }
            }
            String answer;
            try {
                AbstractConfig config = new AbstractConfig(definitions(), props);
                new GroupCoordinatorConfig(config);
                new ShareGroupConfig(config);
                answer = "ok";
            } catch (Exception e) {
                answer = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            System.out.println(answer.replace('\n', ' '));
        }
    }
}
