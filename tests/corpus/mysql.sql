-- MySQL/MariaDB corpus: every statement form and type lakeshift translates.
-- It runs as is on MariaDB 10.11 (the execution test does that).
/*!40101 SET NAMES utf8mb4 */;
SET FOREIGN_KEY_CHECKS = 0;
CREATE TABLE `customers` (
  `id` int unsigned NOT NULL AUTO_INCREMENT COMMENT 'surrogate key',
  `Email` varchar(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `full name` varchar(100) DEFAULT NULL,
  `select` tinyint(1) NOT NULL DEFAULT 0,
  `created_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  `updated_at` datetime(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_email` (`Email`),
  KEY `idx_name` (`full name`(20))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='people who buy';
CREATE TABLE all_types (
  pk bigint NOT NULL,
  t1 tinyint, t1u tinyint unsigned, s2 smallint, s2u smallint unsigned,
  m3 mediumint, m3u mediumint unsigned, i4 int(11), i4u int(10) unsigned zerofill,
  b8 bigint(20), b8u bigint unsigned,
  d1 decimal(10,2), d2 decimal(65,30), d3 numeric, d4 decimal(5,2) unsigned,
  f4 float, f8 double, f9 double precision, r1 real,
  bt1 bit(1), bt9 bit(9), bo bool, bo2 boolean,
  c1 char(10), c2 char, v1 varchar(255), nv nvarchar(20),
  tt tinytext, tx text, mt mediumtext, lt longtext,
  bi binary(16), vb varbinary(300), tb tinyblob, bl blob, mb mediumblob, lb longblob,
  e1 enum('small','medium','large') NOT NULL DEFAULT 'medium',
  s1 set('a','b','c'),
  j json,
  dt date, tm time, tm3 time(3), dtt datetime, dt6 datetime(6), ts timestamp NULL, ts3 timestamp(3) NULL,
  y year,
  g geometry, pt point,
  PRIMARY KEY (pk)
) ENGINE=InnoDB;
CREATE TABLE orders (
  id bigint unsigned NOT NULL AUTO_INCREMENT,
  customer_id int unsigned NOT NULL,
  amount decimal(12,2) NOT NULL DEFAULT '0.00',
  note varchar(200) DEFAULT 'it''s \\ fine',
  total_cents bigint GENERATED ALWAYS AS (amount * 100) VIRTUAL,
  PRIMARY KEY (id),
  KEY idx_customer (customer_id),
  CONSTRAINT fk_orders_customer FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE CASCADE,
  CONSTRAINT chk_amount CHECK (amount >= 0)
) ENGINE=InnoDB AUTO_INCREMENT=1000 DEFAULT CHARSET=utf8mb4;
CREATE TABLE events (
  id bigint NOT NULL,
  happened date NOT NULL,
  PRIMARY KEY (id, happened)
) ENGINE=InnoDB
PARTITION BY RANGE (YEAR(happened)) (PARTITION p2024 VALUES LESS THAN (2025), PARTITION pmax VALUES LESS THAN MAXVALUE);
CREATE TABLE IF NOT EXISTS docs (
  id int NOT NULL PRIMARY KEY,
  body text,
  FULLTEXT KEY ft_body (body)
) ENGINE=InnoDB;
ALTER TABLE customers ADD COLUMN phone varchar(32) NULL AFTER `Email`;
ALTER TABLE customers ADD COLUMN (nickname varchar(40), score int NOT NULL DEFAULT 0);
ALTER TABLE customers ADD COLUMN rank_first smallint FIRST;
ALTER TABLE customers MODIFY phone varchar(64) NOT NULL DEFAULT '';
ALTER TABLE customers CHANGE nickname alias varchar(80) DEFAULT 'anon' COMMENT 'display name';
ALTER TABLE customers ALTER COLUMN score SET DEFAULT 10;
ALTER TABLE customers ALTER COLUMN score DROP DEFAULT;
ALTER TABLE customers RENAME COLUMN alias TO display_name;
ALTER TABLE customers DROP COLUMN rank_first, ADD INDEX idx_phone (phone);
ALTER TABLE customers COMMENT = 'buyers', ENGINE=InnoDB;
ALTER TABLE customers CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
ALTER TABLE docs DROP PRIMARY KEY, ADD PRIMARY KEY (id, body(10));
ALTER TABLE orders DROP FOREIGN KEY fk_orders_customer;
ALTER TABLE orders ADD CONSTRAINT fk_orders_customer2 FOREIGN KEY (customer_id) REFERENCES customers (id);
CREATE INDEX idx_amount ON orders (amount DESC);
DROP INDEX idx_amount ON orders;
CREATE UNIQUE INDEX uk_note ON orders (note);
ALTER TABLE orders MODIFY COLUMN amount decimal(14,2) NOT NULL;
CREATE TABLE serials (id SERIAL, code smallint);
CREATE TABLE serials2 (id smallint SERIAL DEFAULT VALUE, val int);
CREATE TABLE tmp_a (x int);
CREATE TABLE tmp_b (y int);
RENAME TABLE tmp_a TO tmp_a2, tmp_b TO tmp_b2;
ALTER TABLE tmp_a2 RENAME TO tmp_a3;
TRUNCATE TABLE tmp_a3;
DROP TABLE IF EXISTS tmp_a3, tmp_b2;
ALTER TABLE docs ADD x int;
ALTER TABLE docs DROP x;
ALTER TABLE docs ADD x bigint;
CREATE VIEW v_customers AS SELECT id, Email FROM customers;
DELIMITER ;;
CREATE TRIGGER trg_orders BEFORE INSERT ON orders FOR EACH ROW BEGIN SET NEW.note = COALESCE(NEW.note, 'x'); END ;;
DELIMITER ;
SET FOREIGN_KEY_CHECKS = 1;
